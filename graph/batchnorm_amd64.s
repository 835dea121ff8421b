//go:build amd64 && !purego

#include "textflag.h"

// The AVX-512 kernels of batch normalization's passes (batchnorm.go's
// portable loops: addRowsGo, bnSqRowsGo, bnNormRowsGo, bnSumsRowsGo,
// bnOutRowsGo), each for data in float64 and in float32 (widened as they
// are loaded, rounded as they are stored), on a block of rows of up to 32
// columns: four vectors of eight float64 per row, under the masks K1–K4
// (the bytes of mask, from the block's first column on). Per column the
// operations are those of the portable loops in the same order, one row
// after the other, so the results have the same bits.

#define LD64(a, z, k) VMOVUPD.Z a, k, z
#define LD32(a, z, k) VCVTPS2PD.Z a, k, z
#define ST64(z, y, a, k) VMOVUPD z, k, a
#define ST32(z, y, a, k) \
	VCVTPD2PS z, y \
	VMOVUPS z, k, a

// MASKS sets K1–K4 from the four low bytes of mask.
#define MASKS(arg) \
	MOVQ arg, DX \
	MOVQ DX, AX \
	ANDQ $0xff, AX \
	KMOVW AX, K1 \
	SHRQ $8, DX \
	MOVQ DX, AX \
	ANDQ $0xff, AX \
	KMOVW AX, K2 \
	SHRQ $8, DX \
	MOVQ DX, AX \
	ANDQ $0xff, AX \
	KMOVW AX, K3 \
	SHRQ $8, DX \
	ANDQ $0xff, DX \
	KMOVW DX, K4

// VEC4 loads the four vectors of 32 float64 at r into z0–z3.
#define VEC4(r, z0, z1, z2, z3) \
	VMOVUPD.Z (r), K1, z0 \
	VMOVUPD.Z 64(r), K2, z1 \
	VMOVUPD.Z 128(r), K3, z2 \
	VMOVUPD.Z 192(r), K4, z3

// SAVE4 stores z0–z3 to the 32 float64 at r.
#define SAVE4(r, z0, z1, z2, z3) \
	VMOVUPD z0, K1, (r) \
	VMOVUPD z1, K2, 64(r) \
	VMOVUPD z2, K3, 128(r) \
	VMOVUPD z3, K4, 192(r)

// LOAD4 loads a row of 32 elements at r (eight elements are O1 bytes).
#define LOAD4(LD, r, O1, O2, O3, z0, z1, z2, z3) \
	LD((r), z0, K1) \
	LD(O1(r), z1, K2) \
	LD(O2(r), z2, K3) \
	LD(O3(r), z3, K4)

#define STORE4(ST, r, O1, O2, O3, z0, z1, z2, z3, y0, y1, y2, y3) \
	ST(z0, y0, (r), K1) \
	ST(z1, y1, O1(r), K2) \
	ST(z2, y2, O2(r), K3) \
	ST(z3, y3, O3(r), K4)

// ADDROWS: acc += each row of x in turn.
#define ADDROWS(SH, LD, O1, O2, O3) \
	MASKS(mask+32(FP)) \
	MOVQ acc+0(FP), DI \
	MOVQ x+8(FP), SI \
	MOVQ stride+16(FP), BX \
	SHLQ $SH, BX \
	MOVQ rows+24(FP), CX \
	VEC4(DI, Z0, Z1, Z2, Z3) \
addloop: \
	TESTQ CX, CX \
	JZ    adddone \
	LOAD4(LD, SI, O1, O2, O3, Z4, Z5, Z6, Z7) \
	VADDPD Z4, Z0, Z0 \
	VADDPD Z5, Z1, Z1 \
	VADDPD Z6, Z2, Z2 \
	VADDPD Z7, Z3, Z3 \
	ADDQ BX, SI \
	DECQ CX \
	JMP  addloop \
adddone: \
	SAVE4(DI, Z0, Z1, Z2, Z3) \
	VZEROUPPER \
	RET

// SQROWS: acc += (x − m)² for each row of x in turn.
#define SQROWS(SH, LD, O1, O2, O3) \
	MASKS(mask+40(FP)) \
	MOVQ acc+0(FP), DI \
	MOVQ m+8(FP), R8 \
	MOVQ x+16(FP), SI \
	MOVQ stride+24(FP), BX \
	SHLQ $SH, BX \
	MOVQ rows+32(FP), CX \
	VEC4(DI, Z0, Z1, Z2, Z3) \
	VEC4(R8, Z8, Z9, Z10, Z11) \
sqloop: \
	TESTQ CX, CX \
	JZ    sqdone \
	LOAD4(LD, SI, O1, O2, O3, Z4, Z5, Z6, Z7) \
	VSUBPD Z8, Z4, Z4 \
	VSUBPD Z9, Z5, Z5 \
	VSUBPD Z10, Z6, Z6 \
	VSUBPD Z11, Z7, Z7 \
	VMULPD Z4, Z4, Z4 \
	VMULPD Z5, Z5, Z5 \
	VMULPD Z6, Z6, Z6 \
	VMULPD Z7, Z7, Z7 \
	VADDPD Z4, Z0, Z0 \
	VADDPD Z5, Z1, Z1 \
	VADDPD Z6, Z2, Z2 \
	VADDPD Z7, Z3, Z3 \
	ADDQ BX, SI \
	DECQ CX \
	JMP  sqloop \
sqdone: \
	SAVE4(DI, Z0, Z1, Z2, Z3) \
	VZEROUPPER \
	RET

// NORMROWS: out = (x − m)·k + b, row by row.
#define NORMROWS(SH, LD, ST, O1, O2, O3) \
	MASKS(mask+56(FP)) \
	MOVQ out+0(FP), DI \
	MOVQ x+8(FP), SI \
	MOVQ m+16(FP), R8 \
	VEC4(R8, Z8, Z9, Z10, Z11) \
	MOVQ k+24(FP), R8 \
	VEC4(R8, Z12, Z13, Z14, Z15) \
	MOVQ b+32(FP), R8 \
	VEC4(R8, Z16, Z17, Z18, Z19) \
	MOVQ stride+40(FP), BX \
	SHLQ $SH, BX \
	MOVQ rows+48(FP), CX \
normloop: \
	TESTQ CX, CX \
	JZ    normdone \
	LOAD4(LD, SI, O1, O2, O3, Z4, Z5, Z6, Z7) \
	VSUBPD Z8, Z4, Z4 \
	VSUBPD Z9, Z5, Z5 \
	VSUBPD Z10, Z6, Z6 \
	VSUBPD Z11, Z7, Z7 \
	VMULPD Z12, Z4, Z4 \
	VMULPD Z13, Z5, Z5 \
	VMULPD Z14, Z6, Z6 \
	VMULPD Z15, Z7, Z7 \
	VADDPD Z16, Z4, Z4 \
	VADDPD Z17, Z5, Z5 \
	VADDPD Z18, Z6, Z6 \
	VADDPD Z19, Z7, Z7 \
	STORE4(ST, DI, O1, O2, O3, Z4, Z5, Z6, Z7, Y4, Y5, Y6, Y7) \
	ADDQ BX, SI \
	ADDQ BX, DI \
	DECQ CX \
	JMP  normloop \
normdone: \
	VZEROUPPER \
	RET

// SUMSROWS: sg += g and sgx += g·(x − m)·inv, row by row.
#define SUMSROWS(SH, LD, O1, O2, O3) \
	MASKS(mask+64(FP)) \
	MOVQ sg+0(FP), DI \
	VEC4(DI, Z0, Z1, Z2, Z3) \
	MOVQ sgx+8(FP), R9 \
	VEC4(R9, Z20, Z21, Z22, Z23) \
	MOVQ m+16(FP), R8 \
	VEC4(R8, Z8, Z9, Z10, Z11) \
	MOVQ inv+24(FP), R8 \
	VEC4(R8, Z12, Z13, Z14, Z15) \
	MOVQ gr+32(FP), R10 \
	MOVQ x+40(FP), SI \
	MOVQ stride+48(FP), BX \
	SHLQ $SH, BX \
	MOVQ rows+56(FP), CX \
sumsloop: \
	TESTQ CX, CX \
	JZ    sumsdone \
	LOAD4(LD, R10, O1, O2, O3, Z16, Z17, Z18, Z19) \
	LOAD4(LD, SI, O1, O2, O3, Z4, Z5, Z6, Z7) \
	VADDPD Z16, Z0, Z0 \
	VADDPD Z17, Z1, Z1 \
	VADDPD Z18, Z2, Z2 \
	VADDPD Z19, Z3, Z3 \
	VSUBPD Z8, Z4, Z4 \
	VSUBPD Z9, Z5, Z5 \
	VSUBPD Z10, Z6, Z6 \
	VSUBPD Z11, Z7, Z7 \
	VMULPD Z4, Z16, Z4 \
	VMULPD Z5, Z17, Z5 \
	VMULPD Z6, Z18, Z6 \
	VMULPD Z7, Z19, Z7 \
	VMULPD Z12, Z4, Z4 \
	VMULPD Z13, Z5, Z5 \
	VMULPD Z14, Z6, Z6 \
	VMULPD Z15, Z7, Z7 \
	VADDPD Z4, Z20, Z20 \
	VADDPD Z5, Z21, Z21 \
	VADDPD Z6, Z22, Z22 \
	VADDPD Z7, Z23, Z23 \
	ADDQ BX, SI \
	ADDQ BX, R10 \
	DECQ CX \
	JMP  sumsloop \
sumsdone: \
	SAVE4(DI, Z0, Z1, Z2, Z3) \
	SAVE4(R9, Z20, Z21, Z22, Z23) \
	VZEROUPPER \
	RET

// OUTROWS: out = k·((g − sg) − (x − m)·inv·sgx), row by row.
#define OUTROWS(SH, LD, ST, O1, O2, O3) \
	MASKS(mask+80(FP)) \
	MOVQ out+0(FP), DI \
	MOVQ gr+8(FP), R10 \
	MOVQ x+16(FP), SI \
	MOVQ m+24(FP), R8 \
	VEC4(R8, Z8, Z9, Z10, Z11) \
	MOVQ inv+32(FP), R8 \
	VEC4(R8, Z12, Z13, Z14, Z15) \
	MOVQ sg+40(FP), R8 \
	VEC4(R8, Z16, Z17, Z18, Z19) \
	MOVQ sgx+48(FP), R8 \
	VEC4(R8, Z20, Z21, Z22, Z23) \
	MOVQ k+56(FP), R8 \
	VEC4(R8, Z24, Z25, Z26, Z27) \
	MOVQ stride+64(FP), BX \
	SHLQ $SH, BX \
	MOVQ rows+72(FP), CX \
outloop: \
	TESTQ CX, CX \
	JZ    outdone \
	LOAD4(LD, R10, O1, O2, O3, Z0, Z1, Z2, Z3) \
	LOAD4(LD, SI, O1, O2, O3, Z4, Z5, Z6, Z7) \
	VSUBPD Z16, Z0, Z0 \
	VSUBPD Z17, Z1, Z1 \
	VSUBPD Z18, Z2, Z2 \
	VSUBPD Z19, Z3, Z3 \
	VSUBPD Z8, Z4, Z4 \
	VSUBPD Z9, Z5, Z5 \
	VSUBPD Z10, Z6, Z6 \
	VSUBPD Z11, Z7, Z7 \
	VMULPD Z12, Z4, Z4 \
	VMULPD Z13, Z5, Z5 \
	VMULPD Z14, Z6, Z6 \
	VMULPD Z15, Z7, Z7 \
	VMULPD Z20, Z4, Z4 \
	VMULPD Z21, Z5, Z5 \
	VMULPD Z22, Z6, Z6 \
	VMULPD Z23, Z7, Z7 \
	VSUBPD Z4, Z0, Z0 \
	VSUBPD Z5, Z1, Z1 \
	VSUBPD Z6, Z2, Z2 \
	VSUBPD Z7, Z3, Z3 \
	VMULPD Z24, Z0, Z0 \
	VMULPD Z25, Z1, Z1 \
	VMULPD Z26, Z2, Z2 \
	VMULPD Z27, Z3, Z3 \
	STORE4(ST, DI, O1, O2, O3, Z0, Z1, Z2, Z3, Y0, Y1, Y2, Y3) \
	ADDQ BX, SI \
	ADDQ BX, R10 \
	ADDQ BX, DI \
	DECQ CX \
	JMP  outloop \
outdone: \
	VZEROUPPER \
	RET

// func addRowsF64(acc *float64, x *float64, stride, rows int, mask uint64)
TEXT ·addRowsF64(SB), NOSPLIT, $0-40
	ADDROWS(3, LD64, 64, 128, 192)

// func addRowsF32(acc *float64, x *float32, stride, rows int, mask uint64)
TEXT ·addRowsF32(SB), NOSPLIT, $0-40
	ADDROWS(2, LD32, 32, 64, 96)

// func bnSqRowsF64(acc, m *float64, x *float64, stride, rows int, mask uint64)
TEXT ·bnSqRowsF64(SB), NOSPLIT, $0-48
	SQROWS(3, LD64, 64, 128, 192)

// func bnSqRowsF32(acc, m *float64, x *float32, stride, rows int, mask uint64)
TEXT ·bnSqRowsF32(SB), NOSPLIT, $0-48
	SQROWS(2, LD32, 32, 64, 96)

// func bnNormRowsF64(out, x *float64, m, k, b *float64, stride, rows int, mask uint64)
TEXT ·bnNormRowsF64(SB), NOSPLIT, $0-64
	NORMROWS(3, LD64, ST64, 64, 128, 192)

// func bnNormRowsF32(out, x *float32, m, k, b *float64, stride, rows int, mask uint64)
TEXT ·bnNormRowsF32(SB), NOSPLIT, $0-64
	NORMROWS(2, LD32, ST32, 32, 64, 96)

// func bnSumsRowsF64(sg, sgx, m, inv *float64, gr, x *float64, stride, rows int, mask uint64)
TEXT ·bnSumsRowsF64(SB), NOSPLIT, $0-72
	SUMSROWS(3, LD64, 64, 128, 192)

// func bnSumsRowsF32(sg, sgx, m, inv *float64, gr, x *float32, stride, rows int, mask uint64)
TEXT ·bnSumsRowsF32(SB), NOSPLIT, $0-72
	SUMSROWS(2, LD32, 32, 64, 96)

// func bnOutRowsF64(out, gr, x *float64, m, inv, sg, sgx, k *float64, stride, rows int, mask uint64)
TEXT ·bnOutRowsF64(SB), NOSPLIT, $0-88
	OUTROWS(3, LD64, ST64, 64, 128, 192)

// func bnOutRowsF32(out, gr, x *float32, m, inv, sg, sgx, k *float64, stride, rows int, mask uint64)
TEXT ·bnOutRowsF32(SB), NOSPLIT, $0-88
	OUTROWS(2, LD32, ST32, 32, 64, 96)
