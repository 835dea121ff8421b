//go:build amd64 && !purego

#include "textflag.h"

// The AVX-512 kernels of im2col and col2im on padded planes (conv.go's
// patchRowGo): for each patch along an output row, each channel and each
// kernel row, its kw elements (kw ≤ the lanes of a vector) are moved
// under the mask K1 from the padded plane to col (im2colRow) or col's
// added to them (col2imRow), in patchRowGo's order: the same bits.

// PATCHES loops over the ow patches (SI: the patch's corner in channel
// 0's plane), the ch channels (R8: its corner in channel k's plane) and
// the kh kernel rows (R10: its row), with col at DI; BODY moves or adds
// one kernel row.
#define PATCHES(SH, BODY) \
	MOVQ col+0(FP), DI \
	MOVQ pad+8(FP), SI \
	MOVQ plane+32(FP), R11 \
	SHLQ $SH, R11 \
	MOVQ pw+40(FP), BX \
	SHLQ $SH, BX \
	MOVQ sw+48(FP), R12 \
	SHLQ $SH, R12 \
	MOVQ kw+64(FP), CX \
	MOVL $1, AX \
	SHLL CX, AX \
	DECL AX \
	KMOVW AX, K1 \
	SHLQ $SH, CX \
	MOVQ ow+16(FP), DX \
ocloop: \
	TESTQ DX, DX \
	JZ    done \
	MOVQ SI, R8 \
	MOVQ ch+24(FP), R9 \
kloop: \
	TESTQ R9, R9 \
	JZ    kdone \
	MOVQ R8, R10 \
	MOVQ kh+56(FP), R13 \
krloop: \
	TESTQ R13, R13 \
	JZ    krdone \
	BODY \
	ADDQ BX, R10 \
	ADDQ CX, DI \
	DECQ R13 \
	JMP  krloop \
krdone: \
	ADDQ R11, R8 \
	DECQ R9 \
	JMP  kloop \
kdone: \
	ADDQ R12, SI \
	DECQ DX \
	JMP  ocloop \
done: \
	VZEROUPPER \
	RET

#define MOVE(MOV) \
	MOV.Z (R10), K1, Z0 \
	MOV Z0, K1, (DI)

#define ADDBACK(MOV, ADD) \
	MOV.Z (R10), K1, Z0 \
	MOV.Z (DI), K1, Z1 \
	ADD Z1, Z0, Z0 \
	MOV Z0, K1, (R10)

// func im2colRowF32(col, pad *float32, ow, ch, plane, pw, sw, kh, kw int)
TEXT ·im2colRowF32(SB), NOSPLIT, $0-72
	PATCHES(2, MOVE(VMOVUPS))

// func im2colRowF64(col, pad *float64, ow, ch, plane, pw, sw, kh, kw int)
TEXT ·im2colRowF64(SB), NOSPLIT, $0-72
	PATCHES(3, MOVE(VMOVUPD))

// func col2imRowF32(col, pad *float32, ow, ch, plane, pw, sw, kh, kw int)
TEXT ·col2imRowF32(SB), NOSPLIT, $0-72
	PATCHES(2, ADDBACK(VMOVUPS, VADDPS))

// func col2imRowF64(col, pad *float64, ow, ch, plane, pw, sw, kh, kw int)
TEXT ·col2imRowF64(SB), NOSPLIT, $0-72
	PATCHES(3, ADDBACK(VMOVUPD, VADDPD))
