//go:build amd64 && !purego

#include "textflag.h"

// The micro-kernels of the general product (gemm.go). Each holds an mr×nr
// block of c in registers and, for each of k terms, multiplies a column of
// a packed panel of A (mr elements, broadcast one at a time) by a row of a
// packed panel of B (nr elements, in vectors) into it; then it stores the
// block, or adds it to c. The same bodies serve float64 and float32: ES is
// the element size, and the instructions come as parameters.
//
// func gemm…(k int, a, b, c *T, ldc int, add bool)

// FMA3Z multiplies the three vectors Z24–Z26 of B by the broadcast bc
// into the accumulators c0–c2 of one row.
#define FMA3Z(FMA, bc, c0, c1, c2) \
	FMA Z24, bc, c0 \
	FMA Z25, bc, c1 \
	FMA Z26, bc, c2

// STEP8 is term i of an unrolled group for the 8×(3 vectors) kernels: A
// at SI (8 elements a term), B at DI (192 bytes a term).
#define STEP8(MOV, BC, FMA, ES, i) \
	MOV (i*192)(DI), Z24 \
	MOV (i*192+64)(DI), Z25 \
	MOV (i*192+128)(DI), Z26 \
	BC (i*8*ES+0*ES)(SI), Z27 \
	FMA3Z(FMA, Z27, Z0, Z1, Z2) \
	BC (i*8*ES+1*ES)(SI), Z28 \
	FMA3Z(FMA, Z28, Z3, Z4, Z5) \
	BC (i*8*ES+2*ES)(SI), Z29 \
	FMA3Z(FMA, Z29, Z6, Z7, Z8) \
	BC (i*8*ES+3*ES)(SI), Z30 \
	FMA3Z(FMA, Z30, Z9, Z10, Z11) \
	BC (i*8*ES+4*ES)(SI), Z31 \
	FMA3Z(FMA, Z31, Z12, Z13, Z14) \
	BC (i*8*ES+5*ES)(SI), Z27 \
	FMA3Z(FMA, Z27, Z15, Z16, Z17) \
	BC (i*8*ES+6*ES)(SI), Z28 \
	FMA3Z(FMA, Z28, Z18, Z19, Z20) \
	BC (i*8*ES+7*ES)(SI), Z29 \
	FMA3Z(FMA, Z29, Z21, Z22, Z23)

// PREFC prefetches the three lines of a row of c at DX and steps to the
// next row: the block of c is in cache when the kernel stores it.
#define PREFC \
	PREFETCHT0 (DX) \
	PREFETCHT0 64(DX) \
	PREFETCHT0 128(DX) \
	ADDQ BX, DX

// ROW3 stores (or adds to memory and stores) three vectors at DX.
#define ROW3(MOV, c0, c1, c2) \
	MOV c0, (DX) \
	MOV c1, 64(DX) \
	MOV c2, 128(DX) \
	ADDQ BX, DX

#define ADDROW3(MOV, ADD, c0, c1, c2) \
	ADD (DX), c0, c0 \
	ADD 64(DX), c1, c1 \
	ADD 128(DX), c2, c2 \
	ROW3(MOV, c0, c1, c2)

// KLOOP runs the k terms of a kernel (k in CX), four steps a loop and then
// one at a time, STEP multiplying one term of the panels at SI (AB bytes a
// term) and DI (BB bytes a term); then it loads c (DX), its row stride in
// bytes (BX) and jumps to add when the block is to be added to c.
#define KLOOP(STEP, MOV, BC, FMA, ES, AB, BB) \
	MOVQ CX, AX \
	SHRQ $2, AX \
	ANDQ $3, CX \
	TESTQ AX, AX \
	JZ   one \
four: \
	STEP(MOV, BC, FMA, ES, 0) \
	STEP(MOV, BC, FMA, ES, 1) \
	STEP(MOV, BC, FMA, ES, 2) \
	STEP(MOV, BC, FMA, ES, 3) \
	ADDQ $(4*AB), SI \
	ADDQ $(4*BB), DI \
	DECQ AX \
	JNZ  four \
one: \
	TESTQ CX, CX \
	JZ   store \
	STEP(MOV, BC, FMA, ES, 0) \
	ADDQ $(AB), SI \
	ADDQ $BB, DI \
	DECQ CX \
	JMP  one \
store: \
	MOVQ c+24(FP), DX \
	MOVQ ldc+32(FP), BX \
	IMULQ $ES, BX \
	MOVBLZX add+40(FP), AX \
	TESTQ AX, AX \
	JNZ  add

// KERN8 is the body of the 8×(3 vectors) kernels: four terms a loop,
// then one at a time.
#define KERN8(MOV, BC, FMA, ADD, ES) \
	MOVQ c+24(FP), DX \
	MOVQ ldc+32(FP), BX \
	IMULQ $ES, BX \
	PREFC \
	PREFC \
	PREFC \
	PREFC \
	PREFC \
	PREFC \
	PREFC \
	PREFC \
	MOVQ k+0(FP), CX \
	MOVQ a+8(FP), SI \
	MOVQ b+16(FP), DI \
	VPXORQ Z0, Z0, Z0 \
	VPXORQ Z1, Z1, Z1 \
	VPXORQ Z2, Z2, Z2 \
	VPXORQ Z3, Z3, Z3 \
	VPXORQ Z4, Z4, Z4 \
	VPXORQ Z5, Z5, Z5 \
	VPXORQ Z6, Z6, Z6 \
	VPXORQ Z7, Z7, Z7 \
	VPXORQ Z8, Z8, Z8 \
	VPXORQ Z9, Z9, Z9 \
	VPXORQ Z10, Z10, Z10 \
	VPXORQ Z11, Z11, Z11 \
	VPXORQ Z12, Z12, Z12 \
	VPXORQ Z13, Z13, Z13 \
	VPXORQ Z14, Z14, Z14 \
	VPXORQ Z15, Z15, Z15 \
	VPXORQ Z16, Z16, Z16 \
	VPXORQ Z17, Z17, Z17 \
	VPXORQ Z18, Z18, Z18 \
	VPXORQ Z19, Z19, Z19 \
	VPXORQ Z20, Z20, Z20 \
	VPXORQ Z21, Z21, Z21 \
	VPXORQ Z22, Z22, Z22 \
	VPXORQ Z23, Z23, Z23 \
	KLOOP(STEP8, MOV, BC, FMA, ES, 8*ES, 192) \
	ROW3(MOV, Z0, Z1, Z2) \
	ROW3(MOV, Z3, Z4, Z5) \
	ROW3(MOV, Z6, Z7, Z8) \
	ROW3(MOV, Z9, Z10, Z11) \
	ROW3(MOV, Z12, Z13, Z14) \
	ROW3(MOV, Z15, Z16, Z17) \
	ROW3(MOV, Z18, Z19, Z20) \
	ROW3(MOV, Z21, Z22, Z23) \
	VZEROUPPER \
	RET \
add: \
	ADDROW3(MOV, ADD, Z0, Z1, Z2) \
	ADDROW3(MOV, ADD, Z3, Z4, Z5) \
	ADDROW3(MOV, ADD, Z6, Z7, Z8) \
	ADDROW3(MOV, ADD, Z9, Z10, Z11) \
	ADDROW3(MOV, ADD, Z12, Z13, Z14) \
	ADDROW3(MOV, ADD, Z15, Z16, Z17) \
	ADDROW3(MOV, ADD, Z18, Z19, Z20) \
	ADDROW3(MOV, ADD, Z21, Z22, Z23) \
	VZEROUPPER \
	RET

// FMA2Y multiplies the two vectors Y12–Y13 of B by the broadcast bc
// into the accumulators c0–c1 of one row.
#define FMA2Y(FMA, bc, c0, c1) \
	FMA Y12, bc, c0 \
	FMA Y13, bc, c1

// STEP6 is term i of an unrolled group for the 6×(2 vectors) kernels: A
// at SI (6 elements a term), B at DI (64 bytes a term).
#define STEP6(MOV, BC, FMA, ES, i) \
	MOV (i*64)(DI), Y12 \
	MOV (i*64+32)(DI), Y13 \
	BC (i*6*ES+0*ES)(SI), Y14 \
	FMA2Y(FMA, Y14, Y0, Y1) \
	BC (i*6*ES+1*ES)(SI), Y15 \
	FMA2Y(FMA, Y15, Y2, Y3) \
	BC (i*6*ES+2*ES)(SI), Y14 \
	FMA2Y(FMA, Y14, Y4, Y5) \
	BC (i*6*ES+3*ES)(SI), Y15 \
	FMA2Y(FMA, Y15, Y6, Y7) \
	BC (i*6*ES+4*ES)(SI), Y14 \
	FMA2Y(FMA, Y14, Y8, Y9) \
	BC (i*6*ES+5*ES)(SI), Y15 \
	FMA2Y(FMA, Y15, Y10, Y11)

// PREFC2 prefetches the 64 bytes of a row of c at DX (one or two lines)
// and steps to the next row.
#define PREFC2 \
	PREFETCHT0 (DX) \
	PREFETCHT0 63(DX) \
	ADDQ BX, DX

// ROW2 stores (or adds to memory and stores) two vectors at DX.
#define ROW2(MOV, c0, c1) \
	MOV c0, (DX) \
	MOV c1, 32(DX) \
	ADDQ BX, DX

#define ADDROW2(MOV, ADD, c0, c1) \
	ADD (DX), c0, c0 \
	ADD 32(DX), c1, c1 \
	ROW2(MOV, c0, c1)

// KERN6 is the body of the 6×(2 vectors) kernels.
#define KERN6(MOV, BC, FMA, ADD, ES) \
	MOVQ c+24(FP), DX \
	MOVQ ldc+32(FP), BX \
	IMULQ $ES, BX \
	PREFC2 \
	PREFC2 \
	PREFC2 \
	PREFC2 \
	PREFC2 \
	PREFC2 \
	MOVQ k+0(FP), CX \
	MOVQ a+8(FP), SI \
	MOVQ b+16(FP), DI \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3 \
	VXORPS Y4, Y4, Y4 \
	VXORPS Y5, Y5, Y5 \
	VXORPS Y6, Y6, Y6 \
	VXORPS Y7, Y7, Y7 \
	VXORPS Y8, Y8, Y8 \
	VXORPS Y9, Y9, Y9 \
	VXORPS Y10, Y10, Y10 \
	VXORPS Y11, Y11, Y11 \
	KLOOP(STEP6, MOV, BC, FMA, ES, 6*ES, 64) \
	ROW2(MOV, Y0, Y1) \
	ROW2(MOV, Y2, Y3) \
	ROW2(MOV, Y4, Y5) \
	ROW2(MOV, Y6, Y7) \
	ROW2(MOV, Y8, Y9) \
	ROW2(MOV, Y10, Y11) \
	VZEROUPPER \
	RET \
add: \
	ADDROW2(MOV, ADD, Y0, Y1) \
	ADDROW2(MOV, ADD, Y2, Y3) \
	ADDROW2(MOV, ADD, Y4, Y5) \
	ADDROW2(MOV, ADD, Y6, Y7) \
	ADDROW2(MOV, ADD, Y8, Y9) \
	ADDROW2(MOV, ADD, Y10, Y11) \
	VZEROUPPER \
	RET


// The packing routines of gemm.go: for the float64 kernels from float64
// or float32 (widened as loaded), and for the float32 kernels from
// float32. SH is log2 of the source's element size, DSH of the panel's;
// LD loads eight elements into a register R (Z0 for float64 panels, Y0
// for float32 ones), ST stores it.
#define LD64(addr, z) VMOVUPD addr, z
#define LD32(addr, z) VCVTPS2PD addr, z
#define LDS(addr, y) VMOVUPS addr, y
#define ST64(r, addr) VMOVUPD r, addr
#define STS(r, addr) VMOVUPS r, addr

// PACKTERMS is the body of packTerms…: for each of kc terms (source rows
// ps elements apart), the panels·w contiguous elements of the term go to
// panels panels of kc·w elements, w of them to each (w a multiple of 8).
#define PACKTERMS(SH, DSH, LD, ST, R) \
	MOVQ dst+0(FP), DI \
	MOVQ src+8(FP), SI \
	MOVQ ps+16(FP), BX \
	SHLQ $SH, BX \
	MOVQ kc+24(FP), CX \
	MOVQ w+40(FP), R9 \
	SHLQ $DSH, R9 \
	MOVQ R9, R11 \
	IMULQ CX, R11 \
term: \
	MOVQ SI, AX \
	MOVQ DI, DX \
	MOVQ panels+32(FP), R10 \
panel: \
	MOVQ DX, R12 \
	LEAQ (DX)(R9*1), R13 \
unit: \
	LD((AX), R) \
	ST(R, (R12)) \
	ADDQ $(8<<SH), AX \
	ADDQ $(8<<DSH), R12 \
	CMPQ R12, R13 \
	JLT  unit \
	ADDQ R11, DX \
	DECQ R10 \
	JNZ  panel \
	ADDQ BX, SI \
	ADDQ R9, DI \
	DECQ CX \
	JNZ  term \
	VZEROUPPER \
	RET

// TR8 transposes the 8×8 block of float64 in Z0–Z7 (Z_i holds row i) into
// Z16–Z23 (Z16+t holds column t), through Z8–Z15.
#define TR8 \
	VUNPCKLPD Z1, Z0, Z8 \
	VUNPCKHPD Z1, Z0, Z9 \
	VUNPCKLPD Z3, Z2, Z10 \
	VUNPCKHPD Z3, Z2, Z11 \
	VUNPCKLPD Z5, Z4, Z12 \
	VUNPCKHPD Z5, Z4, Z13 \
	VUNPCKLPD Z7, Z6, Z14 \
	VUNPCKHPD Z7, Z6, Z15 \
	VSHUFF64X2 $0x88, Z10, Z8, Z0 \
	VSHUFF64X2 $0xdd, Z10, Z8, Z1 \
	VSHUFF64X2 $0x88, Z11, Z9, Z2 \
	VSHUFF64X2 $0xdd, Z11, Z9, Z3 \
	VSHUFF64X2 $0x88, Z14, Z12, Z4 \
	VSHUFF64X2 $0xdd, Z14, Z12, Z5 \
	VSHUFF64X2 $0x88, Z15, Z13, Z6 \
	VSHUFF64X2 $0xdd, Z15, Z13, Z7 \
	VSHUFF64X2 $0x88, Z4, Z0, Z16 \
	VSHUFF64X2 $0xdd, Z4, Z0, Z20 \
	VSHUFF64X2 $0x88, Z6, Z2, Z17 \
	VSHUFF64X2 $0xdd, Z6, Z2, Z21 \
	VSHUFF64X2 $0x88, Z5, Z1, Z18 \
	VSHUFF64X2 $0xdd, Z5, Z1, Z22 \
	VSHUFF64X2 $0x88, Z7, Z3, Z19 \
	VSHUFF64X2 $0xdd, Z7, Z3, Z23

// TR8S transposes the 8×8 block of float32 in Y0–Y7 (Y_i holds row i)
// into Y8–Y15 (Y8+t holds column t).
#define TR8S \
	VUNPCKLPS Y1, Y0, Y8 \
	VUNPCKHPS Y1, Y0, Y9 \
	VUNPCKLPS Y3, Y2, Y10 \
	VUNPCKHPS Y3, Y2, Y11 \
	VUNPCKLPS Y5, Y4, Y12 \
	VUNPCKHPS Y5, Y4, Y13 \
	VUNPCKLPS Y7, Y6, Y14 \
	VUNPCKHPS Y7, Y6, Y15 \
	VSHUFPS $0x44, Y10, Y8, Y0 \
	VSHUFPS $0xee, Y10, Y8, Y1 \
	VSHUFPS $0x44, Y11, Y9, Y2 \
	VSHUFPS $0xee, Y11, Y9, Y3 \
	VSHUFPS $0x44, Y14, Y12, Y4 \
	VSHUFPS $0xee, Y14, Y12, Y5 \
	VSHUFPS $0x44, Y15, Y13, Y6 \
	VSHUFPS $0xee, Y15, Y13, Y7 \
	VPERM2F128 $0x20, Y4, Y0, Y8 \
	VPERM2F128 $0x20, Y5, Y1, Y9 \
	VPERM2F128 $0x20, Y6, Y2, Y10 \
	VPERM2F128 $0x20, Y7, Y3, Y11 \
	VPERM2F128 $0x31, Y4, Y0, Y12 \
	VPERM2F128 $0x31, Y5, Y1, Y13 \
	VPERM2F128 $0x31, Y6, Y2, Y14 \
	VPERM2F128 $0x31, Y7, Y3, Y15

// PACKROWS8 is the body of packRows8…: eight rows of the source (rs
// elements apart), kc terms each (kc a multiple of 8), go to dst
// transposed: term p's eight elements at dst + p·w. Eight terms at a time
// are loaded as an 8×8 block and transposed in registers.
#define PACKROWS8(SH, ES, LD) \
	MOVQ dst+0(FP), DI \
	MOVQ src+8(FP), SI \
	MOVQ rs+16(FP), BX \
	SHLQ $SH, BX \
	MOVQ kc+24(FP), CX \
	SHRQ $3, CX \
	MOVQ w+32(FP), R9 \
	SHLQ $3, R9 \
	LEAQ (SI)(BX*1), R8 \
	LEAQ (R8)(BX*1), R10 \
	LEAQ (R10)(BX*1), R11 \
	LEAQ (R11)(BX*1), R12 \
	LEAQ (R12)(BX*1), R13 \
	LEAQ (R13)(BX*1), AX \
	LEAQ (AX)(BX*1), DX \
	XORQ BX, BX \
block: \
	LD((SI)(BX*ES), Z0) \
	LD((R8)(BX*ES), Z1) \
	LD((R10)(BX*ES), Z2) \
	LD((R11)(BX*ES), Z3) \
	LD((R12)(BX*ES), Z4) \
	LD((R13)(BX*ES), Z5) \
	LD((AX)(BX*ES), Z6) \
	LD((DX)(BX*ES), Z7) \
	TR8 \
	VMOVUPD Z16, (DI) \
	ADDQ R9, DI \
	VMOVUPD Z17, (DI) \
	ADDQ R9, DI \
	VMOVUPD Z18, (DI) \
	ADDQ R9, DI \
	VMOVUPD Z19, (DI) \
	ADDQ R9, DI \
	VMOVUPD Z20, (DI) \
	ADDQ R9, DI \
	VMOVUPD Z21, (DI) \
	ADDQ R9, DI \
	VMOVUPD Z22, (DI) \
	ADDQ R9, DI \
	VMOVUPD Z23, (DI) \
	ADDQ R9, DI \
	ADDQ $8, BX \
	DECQ CX \
	JNZ  block \
	VZEROUPPER \
	RET

// PACKROWS8S is PACKROWS8 for float32 panels from float32.
#define PACKROWS8S \
	MOVQ dst+0(FP), DI \
	MOVQ src+8(FP), SI \
	MOVQ rs+16(FP), BX \
	SHLQ $2, BX \
	MOVQ kc+24(FP), CX \
	SHRQ $3, CX \
	MOVQ w+32(FP), R9 \
	SHLQ $2, R9 \
	LEAQ (SI)(BX*1), R8 \
	LEAQ (R8)(BX*1), R10 \
	LEAQ (R10)(BX*1), R11 \
	LEAQ (R11)(BX*1), R12 \
	LEAQ (R12)(BX*1), R13 \
	LEAQ (R13)(BX*1), AX \
	LEAQ (AX)(BX*1), DX \
	XORQ BX, BX \
blocks: \
	VMOVUPS (SI)(BX*4), Y0 \
	VMOVUPS (R8)(BX*4), Y1 \
	VMOVUPS (R10)(BX*4), Y2 \
	VMOVUPS (R11)(BX*4), Y3 \
	VMOVUPS (R12)(BX*4), Y4 \
	VMOVUPS (R13)(BX*4), Y5 \
	VMOVUPS (AX)(BX*4), Y6 \
	VMOVUPS (DX)(BX*4), Y7 \
	TR8S \
	VMOVUPS Y8, (DI) \
	ADDQ R9, DI \
	VMOVUPS Y9, (DI) \
	ADDQ R9, DI \
	VMOVUPS Y10, (DI) \
	ADDQ R9, DI \
	VMOVUPS Y11, (DI) \
	ADDQ R9, DI \
	VMOVUPS Y12, (DI) \
	ADDQ R9, DI \
	VMOVUPS Y13, (DI) \
	ADDQ R9, DI \
	VMOVUPS Y14, (DI) \
	ADDQ R9, DI \
	VMOVUPS Y15, (DI) \
	ADDQ R9, DI \
	ADDQ $8, BX \
	DECQ CX \
	JNZ  blocks \
	VZEROUPPER \
	RET

// func gemm8x24F64(k int, a, b, c *float64, ldc int, add bool)
// is the AVX-512 kernel for float64: an 8×24 block of c in 24 registers.
TEXT ·gemm8x24F64(SB), NOSPLIT, $0-41
	KERN8(VMOVUPD, VBROADCASTSD, VFMADD231PD, VADDPD, 8)

// func gemm8x48F32(k int, a, b, c *float32, ldc int, add bool)
// is the AVX-512 kernel for float32: an 8×48 block of c.
TEXT ·gemm8x48F32(SB), NOSPLIT, $0-41
	KERN8(VMOVUPS, VBROADCASTSS, VFMADD231PS, VADDPS, 4)

// func gemm6x8F64(k int, a, b, c *float64, ldc int, add bool)
// is the AVX2 kernel for float64: a 6×8 block of c in 12 registers.
TEXT ·gemm6x8F64(SB), NOSPLIT, $0-41
	KERN6(VMOVUPD, VBROADCASTSD, VFMADD231PD, VADDPD, 8)

// func gemm6x16F32(k int, a, b, c *float32, ldc int, add bool)
// is the AVX2 kernel for float32: a 6×16 block of c.
TEXT ·gemm6x16F32(SB), NOSPLIT, $0-41
	KERN6(VMOVUPS, VBROADCASTSS, VFMADD231PS, VADDPS, 4)

// func packTermsF64(dst, src *float64, ps, kc, panels, w int)
TEXT ·packTermsF64(SB), NOSPLIT, $0-48
	PACKTERMS(3, 3, LD64, ST64, Z0)

// func packTermsF32F64(dst *float64, src *float32, ps, kc, panels, w int)
TEXT ·packTermsF32F64(SB), NOSPLIT, $0-48
	PACKTERMS(2, 3, LD32, ST64, Z0)

// func packTermsF32(dst, src *float32, ps, kc, panels, w int)
TEXT ·packTermsF32(SB), NOSPLIT, $0-48
	PACKTERMS(2, 2, LDS, STS, Y0)

// func packRows8F64(dst, src *float64, rs, kc, w int)
TEXT ·packRows8F64(SB), NOSPLIT, $0-40
	PACKROWS8(3, 8, LD64)

// func packRows8F32F64(dst *float64, src *float32, rs, kc, w int)
TEXT ·packRows8F32F64(SB), NOSPLIT, $0-40
	PACKROWS8(2, 4, LD32)

// func packRows8F32(dst, src *float32, rs, kc, w int)
TEXT ·packRows8F32(SB), NOSPLIT, $0-40
	PACKROWS8S
