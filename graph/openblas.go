//go:build openblas

// This file is compiled only with -tags openblas. It switches gonum's BLAS
// (which gonum's mat and every other package of the process call for
// matrix products) from gonum's pure-Go implementation to OpenBLAS through
// cgo, and sends graph/'s wide products there too instead of to its own
// gemm, so that the two can be compared. Build and test with
//
//	apt-get install libopenblas-dev   # Debian: the header-less link name libopenblas.so
//	CGO_LDFLAGS=-lopenblas go test -tags openblas ./...
//
// The default build stays pure Go. OpenBLAS picks its thread count from
// OPENBLAS_NUM_THREADS (default: every CPU).

package graph

import (
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/netlib/blas/netlib"
)

func init() {
	blas64.Use(netlib.Implementation{})
	blas32.Use(netlib.Implementation{})
	openBLAS = true
}
