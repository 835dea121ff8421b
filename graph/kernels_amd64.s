//go:build amd64 && !purego

#include "textflag.h"

// func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eaxArg+0(FP), AX
	MOVL ecxArg+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv() (eax, edx uint32)
TEXT ·xgetbv(SB), NOSPLIT, $0-8
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	MOVL DX, edx+4(FP)
	RET

// func dot4AVX(x, b0, b1, b2, b3 *float64, n int) (s0, s1, s2, s3 float64)
// returns the dot products of x with b0..b3 over n elements, n a multiple
// of 8.
TEXT ·dot4AVX(SB), NOSPLIT, $0-80
	MOVQ x+0(FP), SI
	MOVQ b0+8(FP), R8
	MOVQ b1+16(FP), R9
	MOVQ b2+24(FP), R10
	MOVQ b3+32(FP), R11
	MOVQ n+40(FP), CX
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	VXORPD Y5, Y5, Y5
	VXORPD Y6, Y6, Y6
	VXORPD Y7, Y7, Y7
	VXORPD Y8, Y8, Y8
	XORQ AX, AX

dotloop:
	CMPQ AX, CX
	JGE  dotdone
	VMOVUPD (SI)(AX*8), Y4
	VMOVUPD 32(SI)(AX*8), Y9
	VFMADD231PD (R8)(AX*8), Y4, Y0
	VFMADD231PD (R9)(AX*8), Y4, Y1
	VFMADD231PD (R10)(AX*8), Y4, Y2
	VFMADD231PD (R11)(AX*8), Y4, Y3
	VFMADD231PD 32(R8)(AX*8), Y9, Y5
	VFMADD231PD 32(R9)(AX*8), Y9, Y6
	VFMADD231PD 32(R10)(AX*8), Y9, Y7
	VFMADD231PD 32(R11)(AX*8), Y9, Y8
	ADDQ $8, AX
	JMP  dotloop

dotdone:
	VADDPD Y5, Y0, Y0
	VADDPD Y6, Y1, Y1
	VADDPD Y7, Y2, Y2
	VADDPD Y8, Y3, Y3
	VEXTRACTF128 $1, Y0, X4
	VADDPD X4, X0, X0
	VHADDPD X0, X0, X0
	VMOVSD X0, s0+48(FP)
	VEXTRACTF128 $1, Y1, X4
	VADDPD X4, X1, X1
	VHADDPD X1, X1, X1
	VMOVSD X1, s1+56(FP)
	VEXTRACTF128 $1, Y2, X4
	VADDPD X4, X2, X2
	VHADDPD X2, X2, X2
	VMOVSD X2, s2+64(FP)
	VEXTRACTF128 $1, Y3, X4
	VADDPD X4, X3, X3
	VHADDPD X3, X3, X3
	VMOVSD X3, s3+72(FP)
	VZEROUPPER
	RET

// func axpy4AVX(c, x0, x1, x2, x3 *float64, a *[4]float64, n int)
// adds a[0]·x0 + a[1]·x1 + a[2]·x2 + a[3]·x3 to c over n elements, n a
// multiple of 4.
TEXT ·axpy4AVX(SB), NOSPLIT, $0-56
	MOVQ c+0(FP), DI
	MOVQ x0+8(FP), R8
	MOVQ x1+16(FP), R9
	MOVQ x2+24(FP), R10
	MOVQ x3+32(FP), R11
	MOVQ a+40(FP), DX
	MOVQ n+48(FP), CX
	VBROADCASTSD 0(DX), Y0
	VBROADCASTSD 8(DX), Y1
	VBROADCASTSD 16(DX), Y2
	VBROADCASTSD 24(DX), Y3
	XORQ AX, AX

axpyloop:
	CMPQ AX, CX
	JGE  axpydone
	VMOVUPD (DI)(AX*8), Y4
	VMULPD  (R8)(AX*8), Y0, Y5
	VFMADD231PD (R9)(AX*8), Y1, Y5
	VMULPD  (R10)(AX*8), Y2, Y6
	VFMADD231PD (R11)(AX*8), Y3, Y6
	VADDPD  Y6, Y5, Y5
	VADDPD  Y5, Y4, Y4
	VMOVUPD Y4, (DI)(AX*8)
	ADDQ $4, AX
	JMP  axpyloop

axpydone:
	VZEROUPPER
	RET

// Constants of expAVX, each repeated in the four lanes of a vector.
#define CONST4(name, bits) \
	DATA name<>+0(SB)/8, $bits \
	DATA name<>+8(SB)/8, $bits \
	DATA name<>+16(SB)/8, $bits \
	DATA name<>+24(SB)/8, $bits \
	GLOBL name<>(SB), RODATA|NOPTR, $32

CONST4(expAbs, 0x7fffffffffffffff)
CONST4(expBound, 0x4085e00000000000) // 700
CONST4(expLog2e, 0x3ff71547652b82fe) // 1/ln 2
CONST4(expLn2Hi, 0x3fe62e42fee00000) // ln 2, high part (math.Ln2Hi)
CONST4(expLn2Lo, 0x3dea39ef35793c76) // ln 2, low part (math.Ln2Lo)
CONST4(expC13, 0x3de6124613a86d09) // 1/13!
CONST4(expC12, 0x3e21eed8eff8d898) // 1/12!
CONST4(expC11, 0x3e5ae64567f544e4) // 1/11!
CONST4(expC10, 0x3e927e4fb7789f5c) // 1/10!
CONST4(expC9, 0x3ec71de3a556c734) // 1/9!
CONST4(expC8, 0x3efa01a01a01a01a) // 1/8!
CONST4(expC7, 0x3f2a01a01a01a01a) // 1/7!
CONST4(expC6, 0x3f56c16c16c16c17) // 1/6!
CONST4(expC5, 0x3f81111111111111) // 1/5!
CONST4(expC4, 0x3fa5555555555555) // 1/4!
CONST4(expC3, 0x3fc5555555555555) // 1/3!
CONST4(expC2, 0x3fe0000000000000) // 1/2
CONST4(expOne, 0x3ff0000000000000) // 1

// func expAVX(dst, src *float64, n int) int
// writes exp(src[i]) to dst[i] four at a time while every element of a
// group of four lies in [-700, 700], n a multiple of 4, and returns the
// number of elements written (the start of the first group it left).
// exp(x) = 2^k·exp(r), k = round(x/ln 2), r = x − k·ln 2 (|r| ≤ ln 2 / 2,
// in two parts so that k·ln2Hi is exact), exp(r) by its Taylor polynomial of
// degree 13 (truncation error below 2^−57), 2^k added to the exponent bits.
TEXT ·expAVX(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX

exploop:
	CMPQ AX, CX
	JGE  expdone
	VMOVUPD (SI)(AX*8), Y0
	VANDPD  expAbs<>(SB), Y0, Y1
	VCMPPD  $6, expBound<>(SB), Y1, Y1 // !(|x| <= 700), true for NaN
	VMOVMSKPD Y1, DX
	TESTQ   DX, DX
	JNZ     expdone
	VMULPD  expLog2e<>(SB), Y0, Y2
	VROUNDPD $0, Y2, Y2                // k
	VMOVAPD Y0, Y3
	VFNMADD231PD expLn2Hi<>(SB), Y2, Y3 // r = x − k·ln2Hi
	VFNMADD231PD expLn2Lo<>(SB), Y2, Y3 // r −= k·ln2Lo
	VMOVUPD expC13<>(SB), Y4
	VFMADD213PD expC12<>(SB), Y3, Y4
	VFMADD213PD expC11<>(SB), Y3, Y4
	VFMADD213PD expC10<>(SB), Y3, Y4
	VFMADD213PD expC9<>(SB), Y3, Y4
	VFMADD213PD expC8<>(SB), Y3, Y4
	VFMADD213PD expC7<>(SB), Y3, Y4
	VFMADD213PD expC6<>(SB), Y3, Y4
	VFMADD213PD expC5<>(SB), Y3, Y4
	VFMADD213PD expC4<>(SB), Y3, Y4
	VFMADD213PD expC3<>(SB), Y3, Y4
	VFMADD213PD expC2<>(SB), Y3, Y4
	VFMADD213PD expOne<>(SB), Y3, Y4
	VFMADD213PD expOne<>(SB), Y3, Y4   // exp(r)
	VCVTPD2DQY Y2, X5
	VPMOVSXDQ X5, Y5
	VPSLLQ  $52, Y5, Y5
	VPADDQ  Y5, Y4, Y4                 // ·2^k
	VMOVUPD Y4, (DI)(AX*8)
	ADDQ    $4, AX
	JMP     exploop

expdone:
	MOVQ AX, ret+24(FP)
	VZEROUPPER
	RET
