//go:build amd64 && !purego

#include "textflag.h"

// FMA24 is one round of 24 independent multiply-adds c += a·b (op) on
// Z0–Z23, a and b in Z30 and Z31: more chains than the FMA units' latency
// times their throughput, so that no multiply-add waits for another.
#define FMA24(op) \
	op Z30, Z31, Z0 \
	op Z30, Z31, Z1 \
	op Z30, Z31, Z2 \
	op Z30, Z31, Z3 \
	op Z30, Z31, Z4 \
	op Z30, Z31, Z5 \
	op Z30, Z31, Z6 \
	op Z30, Z31, Z7 \
	op Z30, Z31, Z8 \
	op Z30, Z31, Z9 \
	op Z30, Z31, Z10 \
	op Z30, Z31, Z11 \
	op Z30, Z31, Z12 \
	op Z30, Z31, Z13 \
	op Z30, Z31, Z14 \
	op Z30, Z31, Z15 \
	op Z30, Z31, Z16 \
	op Z30, Z31, Z17 \
	op Z30, Z31, Z18 \
	op Z30, Z31, Z19 \
	op Z30, Z31, Z20 \
	op Z30, Z31, Z21 \
	op Z30, Z31, Z22 \
	op Z30, Z31, Z23

// FMA12 is FMA24 with the sixteen registers of AVX2: Y0–Y11, a and b in
// Y14 and Y15.
#define FMA12(op) \
	op Y14, Y15, Y0 \
	op Y14, Y15, Y1 \
	op Y14, Y15, Y2 \
	op Y14, Y15, Y3 \
	op Y14, Y15, Y4 \
	op Y14, Y15, Y5 \
	op Y14, Y15, Y6 \
	op Y14, Y15, Y7 \
	op Y14, Y15, Y8 \
	op Y14, Y15, Y9 \
	op Y14, Y15, Y10 \
	op Y14, Y15, Y11

// ZERO24 and ZERO12 clear the registers of FMA24 and FMA12, so that no
// value grows (0 + 0·0 stays 0, and no denormal slows an unit).
#define ZERO24 \
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
	VPXORQ Z30, Z30, Z30 \
	VPXORQ Z31, Z31, Z31

#define ZERO12 \
	VXORPD Y0, Y0, Y0 \
	VXORPD Y1, Y1, Y1 \
	VXORPD Y2, Y2, Y2 \
	VXORPD Y3, Y3, Y3 \
	VXORPD Y4, Y4, Y4 \
	VXORPD Y5, Y5, Y5 \
	VXORPD Y6, Y6, Y6 \
	VXORPD Y7, Y7, Y7 \
	VXORPD Y8, Y8, Y8 \
	VXORPD Y9, Y9, Y9 \
	VXORPD Y10, Y10, Y10 \
	VXORPD Y11, Y11, Y11 \
	VXORPD Y14, Y14, Y14 \
	VXORPD Y15, Y15, Y15

// PEAK clears the registers with ZERO, then runs n rounds of ROUND (48
// vector multiply-adds).
#define PEAK(ZERO, ROUND) \
	MOVQ n+0(FP), CX \
	ZERO \
loop: \
	ROUND \
	DECQ CX \
	JNZ  loop \
	VZEROUPPER \
	RET

#define ROUND512(op) \
	FMA24(op) \
	FMA24(op)

#define ROUND256(op) \
	FMA12(op) \
	FMA12(op) \
	FMA12(op) \
	FMA12(op)

// func peakCPUID(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
TEXT ·peakCPUID(SB), NOSPLIT, $0-24
	MOVL eaxArg+0(FP), AX
	MOVL ecxArg+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func peakXGETBV() uint32
TEXT ·peakXGETBV(SB), NOSPLIT, $0-4
	MOVL $0, CX
	XGETBV
	MOVL AX, ret+0(FP)
	RET

// func peakFMA512PD(n int)
// runs n rounds of 48 vector multiply-adds of eight float64 lanes.
TEXT ·peakFMA512PD(SB), NOSPLIT, $0-8
	PEAK(ZERO24, ROUND512(VFMADD231PD))

// func peakFMA512PS(n int)
// is peakFMA512PD with sixteen float32 lanes.
TEXT ·peakFMA512PS(SB), NOSPLIT, $0-8
	PEAK(ZERO24, ROUND512(VFMADD231PS))

// func peakFMA256PD(n int)
// runs n rounds of 48 vector multiply-adds of four float64 lanes (AVX2).
TEXT ·peakFMA256PD(SB), NOSPLIT, $0-8
	PEAK(ZERO12, ROUND256(VFMADD231PD))

// func peakFMA256PS(n int)
// is peakFMA256PD with eight float32 lanes.
TEXT ·peakFMA256PS(SB), NOSPLIT, $0-8
	PEAK(ZERO12, ROUND256(VFMADD231PS))
