//go:build amd64 && !purego

#include "textflag.h"

// The AVX-512 kernels of 2×2 max pooling with stride 2 (pool.go's
// poolGatherInto and poolScatterInto for pool2x2): a vector of output
// windows at a time along an output row (sixteen float32 or eight
// float64), each window's four elements split from its two input rows by
// permutations (even and odd columns), compared one after the other as
// poolArgmax compares them (strictly greater wins, so the first largest,
// and NaN never wins over an earlier element), and for the adjoint each
// window's four elements written back (0 + g at the argmax, 0 elsewhere),
// interleaved again. The last vector of each row takes the masks lo and
// hi (its input columns) and om (its outputs); the others are whole.

DATA poolEven32<>+0(SB)/4, $0
DATA poolEven32<>+4(SB)/4, $2
DATA poolEven32<>+8(SB)/4, $4
DATA poolEven32<>+12(SB)/4, $6
DATA poolEven32<>+16(SB)/4, $8
DATA poolEven32<>+20(SB)/4, $10
DATA poolEven32<>+24(SB)/4, $12
DATA poolEven32<>+28(SB)/4, $14
DATA poolEven32<>+32(SB)/4, $16
DATA poolEven32<>+36(SB)/4, $18
DATA poolEven32<>+40(SB)/4, $20
DATA poolEven32<>+44(SB)/4, $22
DATA poolEven32<>+48(SB)/4, $24
DATA poolEven32<>+52(SB)/4, $26
DATA poolEven32<>+56(SB)/4, $28
DATA poolEven32<>+60(SB)/4, $30
GLOBL poolEven32<>(SB), RODATA|NOPTR, $64

DATA poolOdd32<>+0(SB)/4, $1
DATA poolOdd32<>+4(SB)/4, $3
DATA poolOdd32<>+8(SB)/4, $5
DATA poolOdd32<>+12(SB)/4, $7
DATA poolOdd32<>+16(SB)/4, $9
DATA poolOdd32<>+20(SB)/4, $11
DATA poolOdd32<>+24(SB)/4, $13
DATA poolOdd32<>+28(SB)/4, $15
DATA poolOdd32<>+32(SB)/4, $17
DATA poolOdd32<>+36(SB)/4, $19
DATA poolOdd32<>+40(SB)/4, $21
DATA poolOdd32<>+44(SB)/4, $23
DATA poolOdd32<>+48(SB)/4, $25
DATA poolOdd32<>+52(SB)/4, $27
DATA poolOdd32<>+56(SB)/4, $29
DATA poolOdd32<>+60(SB)/4, $31
GLOBL poolOdd32<>(SB), RODATA|NOPTR, $64

DATA poolLo32<>+0(SB)/4, $0
DATA poolLo32<>+4(SB)/4, $16
DATA poolLo32<>+8(SB)/4, $1
DATA poolLo32<>+12(SB)/4, $17
DATA poolLo32<>+16(SB)/4, $2
DATA poolLo32<>+20(SB)/4, $18
DATA poolLo32<>+24(SB)/4, $3
DATA poolLo32<>+28(SB)/4, $19
DATA poolLo32<>+32(SB)/4, $4
DATA poolLo32<>+36(SB)/4, $20
DATA poolLo32<>+40(SB)/4, $5
DATA poolLo32<>+44(SB)/4, $21
DATA poolLo32<>+48(SB)/4, $6
DATA poolLo32<>+52(SB)/4, $22
DATA poolLo32<>+56(SB)/4, $7
DATA poolLo32<>+60(SB)/4, $23
GLOBL poolLo32<>(SB), RODATA|NOPTR, $64

DATA poolHi32<>+0(SB)/4, $8
DATA poolHi32<>+4(SB)/4, $24
DATA poolHi32<>+8(SB)/4, $9
DATA poolHi32<>+12(SB)/4, $25
DATA poolHi32<>+16(SB)/4, $10
DATA poolHi32<>+20(SB)/4, $26
DATA poolHi32<>+24(SB)/4, $11
DATA poolHi32<>+28(SB)/4, $27
DATA poolHi32<>+32(SB)/4, $12
DATA poolHi32<>+36(SB)/4, $28
DATA poolHi32<>+40(SB)/4, $13
DATA poolHi32<>+44(SB)/4, $29
DATA poolHi32<>+48(SB)/4, $14
DATA poolHi32<>+52(SB)/4, $30
DATA poolHi32<>+56(SB)/4, $15
DATA poolHi32<>+60(SB)/4, $31
GLOBL poolHi32<>(SB), RODATA|NOPTR, $64

DATA poolEven64<>+0(SB)/8, $0
DATA poolEven64<>+8(SB)/8, $2
DATA poolEven64<>+16(SB)/8, $4
DATA poolEven64<>+24(SB)/8, $6
DATA poolEven64<>+32(SB)/8, $8
DATA poolEven64<>+40(SB)/8, $10
DATA poolEven64<>+48(SB)/8, $12
DATA poolEven64<>+56(SB)/8, $14
GLOBL poolEven64<>(SB), RODATA|NOPTR, $64

DATA poolOdd64<>+0(SB)/8, $1
DATA poolOdd64<>+8(SB)/8, $3
DATA poolOdd64<>+16(SB)/8, $5
DATA poolOdd64<>+24(SB)/8, $7
DATA poolOdd64<>+32(SB)/8, $9
DATA poolOdd64<>+40(SB)/8, $11
DATA poolOdd64<>+48(SB)/8, $13
DATA poolOdd64<>+56(SB)/8, $15
GLOBL poolOdd64<>(SB), RODATA|NOPTR, $64

DATA poolLo64<>+0(SB)/8, $0
DATA poolLo64<>+8(SB)/8, $8
DATA poolLo64<>+16(SB)/8, $1
DATA poolLo64<>+24(SB)/8, $9
DATA poolLo64<>+32(SB)/8, $2
DATA poolLo64<>+40(SB)/8, $10
DATA poolLo64<>+48(SB)/8, $3
DATA poolLo64<>+56(SB)/8, $11
GLOBL poolLo64<>(SB), RODATA|NOPTR, $64

DATA poolHi64<>+0(SB)/8, $4
DATA poolHi64<>+8(SB)/8, $12
DATA poolHi64<>+16(SB)/8, $5
DATA poolHi64<>+24(SB)/8, $13
DATA poolHi64<>+32(SB)/8, $6
DATA poolHi64<>+40(SB)/8, $14
DATA poolHi64<>+48(SB)/8, $7
DATA poolHi64<>+56(SB)/8, $15
GLOBL poolHi64<>(SB), RODATA|NOPTR, $64

// MASKS sets K1–K3 to the masks of the vector: whole (FULL) or the
// row's last (the arguments lo, hi, om) when R12 (vectors left) is 1.
#define MASKS(FULL) \
	CMPQ R12, $1 \
	JEQ  lastmask \
	MOVQ $FULL, AX \
	KMOVW AX, K1 \
	KMOVW AX, K2 \
	KMOVW AX, K3 \
	JMP  maskdone \
lastmask: \
	KMOVW lo+48(FP), K1 \
	KMOVW hi+56(FP), K2 \
	KMOVW om+64(FP), K3 \
maskdone:

// SPLIT loads the two vectors at a and b (one row's columns) and leaves
// the even columns in ze and the odd ones in zo.
#define SPLIT(MOV, PERM, a, b, ze, zo) \
	MOV.Z a, K1, ze \
	MOV.Z b, K2, Z26 \
	VMOVAPD ze, zo \
	PERM Z26, Z30, ze \
	PERM Z26, Z31, zo

// ROWS loops over the output rows (rows+24(FP)) and, in each, over its
// vectors (n+40(FP) of them), with the input rows at SI and SI+BX (and
// R8, R8+BX for a second input) and the outputs at DI; BODY computes one
// vector; VB is the bytes of a vector, OB of a vector's outputs.
#define ROWS(BODY, FULL, VB, OB) \
	MOVQ rows+24(FP), CX \
rowloop: \
	TESTQ CX, CX \
	JZ    rowdone \
	MOVQ SI, R9 \
	MOVQ R8, R10 \
	MOVQ DI, R11 \
	MOVQ n+40(FP), R12 \
vecloop: \
	TESTQ R12, R12 \
	JZ    vecdone \
	MASKS(FULL) \
	BODY \
	ADDQ $(2*VB), R9 \
	ADDQ $(2*VB), R10 \
	ADDQ $OB, R11 \
	DECQ R12 \
	JMP  vecloop \
vecdone: \
	LEAQ (SI)(BX*2), SI \
	LEAQ (R8)(BX*2), R8 \
	ADDQ DX, DI \
	DECQ CX \
	JMP  rowloop \
rowdone: \
	VZEROUPPER \
	RET

// PROLOGUE loads the arguments: pooled (DI), src (SI), image (R8), the input row's bytes (BX), the output row's (DX), and the
// permutations.
#define PROLOGUE(SH, EVEN, ODD, LO, HI) \
	MOVQ pooled+0(FP), DI \
	MOVQ src+8(FP), SI \
	MOVQ image+16(FP), R8 \
	MOVQ w+32(FP), BX \
	SHLQ $SH, BX \
	MOVQ ow+72(FP), DX \
	SHLQ $SH, DX \
	VMOVUPD EVEN(SB), Z30 \
	VMOVUPD ODD(SB), Z31 \
	VMOVUPD LO(SB), Z28 \
	VMOVUPD HI(SB), Z29 \
	VPXORQ Z27, Z27, Z27

// GATHER: the element of the second input at each window's argmax.
#define GATHER(MOV, MOVA, PERM, CMP, VB) \
	SPLIT(MOV, PERM, (R9), VB(R9), Z0, Z1) \
	SPLIT(MOV, PERM, (R9)(BX*1), VB(R9)(BX*1), Z2, Z3) \
	SPLIT(MOV, PERM, (R10), VB(R10), Z4, Z5) \
	SPLIT(MOV, PERM, (R10)(BX*1), VB(R10)(BX*1), Z6, Z7) \
	CMP $14, Z0, Z1, K4 \
	MOVA Z1, K4, Z0 \
	MOVA Z5, K4, Z4 \
	CMP $14, Z0, Z2, K4 \
	MOVA Z2, K4, Z0 \
	MOVA Z6, K4, Z4 \
	CMP $14, Z0, Z3, K4 \
	MOVA Z7, K4, Z4 \
	MOV Z4, K3, (R11)

// SCATTER: 0 + g at each window's argmax, 0 at its other elements.
#define SCATTER(MOV, MOVA, PERM, CMP, ADD, VB) \
	SPLIT(MOV, PERM, (R9), VB(R9), Z0, Z1) \
	SPLIT(MOV, PERM, (R9)(BX*1), VB(R9)(BX*1), Z2, Z3) \
	MOV.Z (R11), K3, Z8 \
	ADD Z8, Z27, Z8 \
	CMP $14, Z0, Z1, K4 \
	MOVA Z1, K4, Z0 \
	CMP $14, Z0, Z2, K5 \
	MOVA Z2, K5, Z0 \
	CMP $14, Z0, Z3, K6 \
	MOVA.Z Z8, K6, Z13 \
	KANDNW K5, K6, K7 \
	MOVA.Z Z8, K7, Z12 \
	KORW K5, K6, K7 \
	KANDNW K4, K7, K5 \
	MOVA.Z Z8, K5, Z11 \
	KORW K4, K7, K7 \
	KNOTW K7, K7 \
	MOVA.Z Z8, K7, Z10 \
	MOVA Z10, Z14 \
	PERM Z11, Z28, Z14 \
	PERM Z11, Z29, Z10 \
	MOV Z14, K1, (R10) \
	MOV Z10, K2, VB(R10) \
	MOVA Z12, Z14 \
	PERM Z13, Z28, Z14 \
	PERM Z13, Z29, Z12 \
	MOV Z14, K1, (R10)(BX*1) \
	MOV Z12, K2, VB(R10)(BX*1)

// func pool2GatherF32(pooled, src, image *float32, rows, w, n, lo, hi, om, ow int)
// sets each element of pooled to the element of image at its window's
// argmax in src.
TEXT ·pool2GatherF32(SB), NOSPLIT, $0-80
	PROLOGUE(2, poolEven32<>, poolOdd32<>, poolLo32<>, poolHi32<>)
	ROWS(GATHER(VMOVUPS, VMOVAPS, VPERMT2PS, VCMPPS, 64), 0xffff, 64, 64)

// func pool2ScatterF32(pooled, src, image *float32, rows, w, n, lo, hi, om, ow int)
// writes each window of image (the input's adjoint): 0 + its element of
// pooled (the output's adjoint) at its argmax in src, 0 elsewhere.
TEXT ·pool2ScatterF32(SB), NOSPLIT, $0-80
	PROLOGUE(2, poolEven32<>, poolOdd32<>, poolLo32<>, poolHi32<>)
	ROWS(SCATTER(VMOVUPS, VMOVAPS, VPERMT2PS, VCMPPS, VADDPS, 64), 0xffff, 64, 64)

// func pool2GatherF64(pooled, src, image *float64, rows, w, n, lo, hi, om, ow int)
// sets each element of pooled to the element of image at its window's
// argmax in src.
TEXT ·pool2GatherF64(SB), NOSPLIT, $0-80
	PROLOGUE(3, poolEven64<>, poolOdd64<>, poolLo64<>, poolHi64<>)
	ROWS(GATHER(VMOVUPD, VMOVAPD, VPERMT2PD, VCMPPD, 64), 0xff, 64, 64)

// func pool2ScatterF64(pooled, src, image *float64, rows, w, n, lo, hi, om, ow int)
// writes each window of image (the input's adjoint): 0 + its element of
// pooled (the output's adjoint) at its argmax in src, 0 elsewhere.
TEXT ·pool2ScatterF64(SB), NOSPLIT, $0-80
	PROLOGUE(3, poolEven64<>, poolOdd64<>, poolLo64<>, poolHi64<>)
	ROWS(SCATTER(VMOVUPD, VMOVAPD, VPERMT2PD, VCMPPD, VADDPD, 64), 0xff, 64, 64)
