package bench

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/blas/blas64"
)

// BLAS names the implementation gonum's blas64 calls in this build:
// "gonum" (pure Go) or "netlib" (cgo, OpenBLAS with -tags openblas).
func BLAS() string {
	s := fmt.Sprintf("%T", blas64.Implementation())
	if i := strings.IndexByte(s, '.'); i > 0 {
		s = s[:i]
	}
	return s
}

// procStatus returns a field of /proc/self/status in bytes, or −1.
func procStatus(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			fs := strings.Fields(rest)
			if len(fs) == 0 {
				return -1
			}
			kb, err := strconv.ParseInt(fs[0], 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}

// PeakStart returns the resident set size after a garbage collection that
// returns free memory to the OS, and resets the kernel's high-water mark
// (VmHWM) to it by writing 5 to /proc/self/clear_refs. It returns −1 where
// that is not possible (not Linux).
func PeakStart() int64 {
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return -1
	}
	return procStatus("VmRSS")
}

// PeakSince returns the growth of the resident set's high-water mark over
// base, a PeakStart value, or −1.
func PeakSince(base int64) int64 {
	if base < 0 {
		return -1
	}
	hwm := procStatus("VmHWM")
	if hwm < 0 {
		return -1
	}
	return max(hwm-base, 0)
}
