//go:build amd64 && !purego

package graph

// The kernels of elementwise_amd64.s: out[i] = x[i] op y[i] (…Vec…) or
// x[i] op c (…Num…) for i < n, and the comparisons (1 where true).

//go:noescape
func addVecF64(out, x, y *float64, n int)

//go:noescape
func addNumF64(out, x *float64, c float64, n int)

//go:noescape
func addVecF32(out, x, y *float32, n int)

//go:noescape
func addNumF32(out, x *float32, c float32, n int)

//go:noescape
func subVecF64(out, x, y *float64, n int)

//go:noescape
func subNumF64(out, x *float64, c float64, n int)

//go:noescape
func subVecF32(out, x, y *float32, n int)

//go:noescape
func subNumF32(out, x *float32, c float32, n int)

//go:noescape
func mulVecF64(out, x, y *float64, n int)

//go:noescape
func mulNumF64(out, x *float64, c float64, n int)

//go:noescape
func mulVecF32(out, x, y *float32, n int)

//go:noescape
func mulNumF32(out, x *float32, c float32, n int)

//go:noescape
func divVecF64(out, x, y *float64, n int)

//go:noescape
func divNumF64(out, x *float64, c float64, n int)

//go:noescape
func divVecF32(out, x, y *float32, n int)

//go:noescape
func divNumF32(out, x *float32, c float32, n int)

//go:noescape
func cmpLTVecF64(out, x, y *float64, n int)

//go:noescape
func cmpLTNumF64(out, x *float64, c float64, n int)

//go:noescape
func cmpLTVecF32(out, x, y *float32, n int)

//go:noescape
func cmpLTNumF32(out, x *float32, c float32, n int)

//go:noescape
func cmpGTVecF64(out, x, y *float64, n int)

//go:noescape
func cmpGTNumF64(out, x *float64, c float64, n int)

//go:noescape
func cmpGTVecF32(out, x, y *float32, n int)

//go:noescape
func cmpGTNumF32(out, x *float32, c float32, n int)

//go:noescape
func cmpLEVecF64(out, x, y *float64, n int)

//go:noescape
func cmpLENumF64(out, x *float64, c float64, n int)

//go:noescape
func cmpLEVecF32(out, x, y *float32, n int)

//go:noescape
func cmpLENumF32(out, x *float32, c float32, n int)

//go:noescape
func cmpGEVecF64(out, x, y *float64, n int)

//go:noescape
func cmpGENumF64(out, x *float64, c float64, n int)

//go:noescape
func cmpGEVecF32(out, x, y *float32, n int)

//go:noescape
func cmpGENumF32(out, x *float32, c float32, n int)

//go:noescape
func cmpEQVecF64(out, x, y *float64, n int)

//go:noescape
func cmpEQNumF64(out, x *float64, c float64, n int)

//go:noescape
func cmpEQVecF32(out, x, y *float32, n int)

//go:noescape
func cmpEQNumF32(out, x *float32, c float32, n int)

//go:noescape
func cmpNEVecF64(out, x, y *float64, n int)

//go:noescape
func cmpNENumF64(out, x *float64, c float64, n int)

//go:noescape
func cmpNEVecF32(out, x, y *float32, n int)

//go:noescape
func cmpNENumF32(out, x *float32, c float32, n int)

// elemKernels64 returns the float64 kernels of op (of comparison kind,
// for opCmp), or nil when it has none.
func elemKernels64(op opKind, kind int) (func(out, x, y *float64, n int), func(out, x *float64, c float64, n int)) {
	switch op {
	case opAdd:
		return addVecF64, addNumF64
	case opSub:
		return subVecF64, subNumF64
	case opMul:
		return mulVecF64, mulNumF64
	case opDiv:
		return divVecF64, divNumF64
	case opCmp:
		switch kind {
		case cmpLT:
			return cmpLTVecF64, cmpLTNumF64
		case cmpGT:
			return cmpGTVecF64, cmpGTNumF64
		case cmpLE:
			return cmpLEVecF64, cmpLENumF64
		case cmpGE:
			return cmpGEVecF64, cmpGENumF64
		case cmpEQ:
			return cmpEQVecF64, cmpEQNumF64
		case cmpNE:
			return cmpNEVecF64, cmpNENumF64
		}
	}
	return nil, nil
}

// elemKernels32 returns the float32 kernels of op, as elemKernels64.
func elemKernels32(op opKind, kind int) (func(out, x, y *float32, n int), func(out, x *float32, c float32, n int)) {
	switch op {
	case opAdd:
		return addVecF32, addNumF32
	case opSub:
		return subVecF32, subNumF32
	case opMul:
		return mulVecF32, mulNumF32
	case opDiv:
		return divVecF32, divNumF32
	case opCmp:
		switch kind {
		case cmpLT:
			return cmpLTVecF32, cmpLTNumF32
		case cmpGT:
			return cmpGTVecF32, cmpGTNumF32
		case cmpLE:
			return cmpLEVecF32, cmpLENumF32
		case cmpGE:
			return cmpGEVecF32, cmpGENumF32
		case cmpEQ:
			return cmpEQVecF32, cmpEQNumF32
		case cmpNE:
			return cmpNEVecF32, cmpNENumF32
		}
	}
	return nil, nil
}

// elemVec sets out[i] = x[i] op y[i] (for opCmp, 1 where x[i] compares
// true with y[i] by kind, else 0) with an AVX-512 kernel, and reports
// whether it did: false without AVX-512 or for another operation.
func elemVec[T float](op opKind, kind int, out, x, y []T) bool {
	if !useAVX512 || len(out) == 0 {
		return false
	}
	x, y = x[:len(out)], y[:len(out)]
	switch o := any(out).(type) {
	case []float64:
		vec, _ := elemKernels64(op, kind)
		if vec == nil {
			return false
		}
		vec(&o[0], &any(x).([]float64)[0], &any(y).([]float64)[0], len(o))
	case []float32:
		vec, _ := elemKernels32(op, kind)
		if vec == nil {
			return false
		}
		vec(&o[0], &any(x).([]float32)[0], &any(y).([]float32)[0], len(o))
	}
	return true
}

// elemNum sets out[i] = x[i] op c (for opCmp, the comparison of x[i] with
// c) with an AVX-512 kernel, and reports whether it did.
func elemNum[T float](op opKind, kind int, out, x []T, c T) bool {
	if !useAVX512 || len(out) == 0 {
		return false
	}
	x = x[:len(out)]
	switch o := any(out).(type) {
	case []float64:
		_, num := elemKernels64(op, kind)
		if num == nil {
			return false
		}
		num(&o[0], &any(x).([]float64)[0], float64(c), len(o))
	case []float32:
		_, num := elemKernels32(op, kind)
		if num == nil {
			return false
		}
		num(&o[0], &any(x).([]float32)[0], float32(c), len(o))
	}
	return true
}
