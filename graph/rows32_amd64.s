//go:build amd64 && !purego

#include "textflag.h"

// The AVX-512 kernels of rows32.go: row maxima, shifts and sums of float32
// rows, and the last passes of the log-softmax and its adjoint. Each
// computes what its Go twin in rows32.go computes, lane for lane.

// func max32AVX512(x *float32, n int, lanes *float32)
// lanes[l] = the maximum of x[16k+l], for n a positive multiple of 16,
// each step keeping the lane's value when it is greater (VMAXPS, as
// maxLanes32Go).
TEXT ·max32AVX512(SB), NOSPLIT, $0-24
	MOVQ    x+0(FP), SI
	MOVQ    n+8(FP), CX
	MOVQ    lanes+16(FP), DI
	VMOVUPS (SI), Z0
	MOVQ    $16, AX

max32Loop:
	CMPQ   AX, CX
	JGE    max32Done
	VMAXPS (SI)(AX*4), Z0, Z0
	ADDQ   $16, AX
	JMP    max32Loop

max32Done:
	VMOVUPS Z0, (DI)
	VZEROUPPER
	RET

// func shift32AVX512(dst, x *float32, n int, c float32)
// dst[i] = x[i] − c for i < n, n a multiple of 16.
TEXT ·shift32AVX512(SB), NOSPLIT, $0-28
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS c+24(FP), Z1
	XORQ         AX, AX

shift32Loop:
	CMPQ    AX, CX
	JGE     shift32Done
	VMOVUPS (SI)(AX*4), Z0
	VSUBPS  Z1, Z0, Z0
	VMOVUPS Z0, (DI)(AX*4)
	ADDQ    $16, AX
	JMP     shift32Loop

shift32Done:
	VZEROUPPER
	RET

// func sum32AVX512(x *float32, n int, lanes *float64)
// lanes[l] += x[32k+l] in float64, k in order, for n a multiple of 32.
TEXT ·sum32AVX512(SB), NOSPLIT, $0-24
	MOVQ    x+0(FP), SI
	MOVQ    n+8(FP), CX
	MOVQ    lanes+16(FP), DI
	VMOVUPD (DI), Z0
	VMOVUPD 64(DI), Z1
	VMOVUPD 128(DI), Z2
	VMOVUPD 192(DI), Z3
	XORQ    AX, AX

sum32Loop:
	CMPQ      AX, CX
	JGE       sum32Done
	VCVTPS2PD (SI)(AX*4), Z4
	VCVTPS2PD 32(SI)(AX*4), Z5
	VCVTPS2PD 64(SI)(AX*4), Z6
	VCVTPS2PD 96(SI)(AX*4), Z7
	VADDPD    Z4, Z0, Z0
	VADDPD    Z5, Z1, Z1
	VADDPD    Z6, Z2, Z2
	VADDPD    Z7, Z3, Z3
	ADDQ      $32, AX
	JMP       sum32Loop

sum32Done:
	VMOVUPD Z0, (DI)
	VMOVUPD Z1, 64(DI)
	VMOVUPD Z2, 128(DI)
	VMOVUPD Z3, 192(DI)
	VZEROUPPER
	RET

// func subLog32AVX512(dst *float32, n int, l float64)
// dst[i] = float32(float64(dst[i]) − l) for i < n, n a multiple of 16.
TEXT ·subLog32AVX512(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSD l+16(FP), Z2
	XORQ         AX, AX

subLog32Loop:
	CMPQ      AX, CX
	JGE       subLog32Done
	VCVTPS2PD (DI)(AX*4), Z0
	VCVTPS2PD 32(DI)(AX*4), Z1
	VSUBPD    Z2, Z0, Z0
	VSUBPD    Z2, Z1, Z1
	VCVTPD2PS Z0, Y0
	VCVTPD2PS Z1, Y1
	VMOVUPS   Y0, (DI)(AX*4)
	VMOVUPS   Y1, 32(DI)(AX*4)
	ADDQ      $16, AX
	JMP       subLog32Loop

subLog32Done:
	VZEROUPPER
	RET

// func mulSub32AVX512(out, x, e *float32, n int, s float32)
// out[i] = x[i] − float32(e[i]·s) for i < n, n a multiple of 16 (a product
// rounded, then a difference: no fused multiply-add).
TEXT ·mulSub32AVX512(SB), NOSPLIT, $0-36
	MOVQ         out+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         e+16(FP), DX
	MOVQ         n+24(FP), CX
	VBROADCASTSS s+32(FP), Z2
	XORQ         AX, AX

mulSub32Loop:
	CMPQ    AX, CX
	JGE     mulSub32Done
	VMULPS  (DX)(AX*4), Z2, Z0
	VMOVUPS (SI)(AX*4), Z1
	VSUBPS  Z0, Z1, Z1
	VMOVUPS Z1, (DI)(AX*4)
	ADDQ    $16, AX
	JMP     mulSub32Loop

mulSub32Done:
	VZEROUPPER
	RET
