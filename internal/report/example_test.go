package report_test

import (
	"os"
	"time"

	"github.com/gobilevel/bilevel/internal/report"
)

// ExampleResult prints the final line every example program ends with:
// keys sorted, floats with 10 significant digits, durations in seconds.
func ExampleResult() {
	report.Result(os.Stdout, map[string]any{
		"upper":   0.049937,
		"iters":   150,
		"runtime": 1500 * time.Millisecond,
		"method":  "AIDBiO",
	})
	// Output:
	// result: iters=150 method=AIDBiO runtime=1.5 upper=0.049937
}
