package report

import (
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
)

// The tick markers of Plot. Labels are written from exact decimals (an
// integer times a power of ten), never from the float64 a product or a
// power rounds to, so they read 0.1 and not 0.09999999999999998.

// linearTicks puts four to ten labelled ticks at multiples of 1, 2 or 5
// times a power of ten, with unlabelled ticks between them.
type linearTicks struct{}

func (linearTicks) Ticks(lo, hi float64) []plot.Tick { return niceTicks(lo, hi, 10) }

// niceTicks returns at most most labelled ticks in [lo, hi] at multiples
// of 1, 2 or 5 times a power of ten, and unlabelled ones between them.
func niceTicks(lo, hi float64, most int) []plot.Tick {
	if !(hi > lo) || !finite(lo) || !finite(hi) {
		return nil
	}
	e := int(math.Floor(math.Log10((hi - lo) / float64(most))))
	// The step m·10^e with m in 1, 2, 5, 10 that gives at most most labels.
	var m int64
	for _, m = range []int64{1, 2, 5, 10} {
		if (hi-lo)/(float64(m)*pow10(e)) <= float64(most) {
			break
		}
	}
	minor := map[int64]int64{1: 5, 2: 4, 5: 5, 10: 5}[m] // minor steps per major
	step := float64(m) * pow10(e) / float64(minor)
	var ticks []plot.Tick
	first, last := int64(math.Ceil(lo/step-1e-9)), int64(math.Floor(hi/step+1e-9))
	if last-first > 1000 { // cannot happen with a step from the range
		return nil
	}
	// One form for the whole axis: if a label needs a power of ten
	// (1×10^6), all do (8×10^5, not 800000 beside it).
	form := decimal
	for k := first; k <= last; k++ {
		if k%minor == 0 && strings.Contains(decimal(k/minor*m, e), "×") {
			form = scientific
		}
	}
	for k := first; k <= last; k++ {
		t := plot.Tick{Value: float64(k) * step}
		if k%minor == 0 {
			t.Label = form(k/minor*m, e)
			t.Value = float64(k/minor*m) * pow10(e)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// logTicks labels the powers of ten 10ᵏ of a logarithmic axis (every
// second or third when there are many), with unlabelled ticks at 2·10ᵏ …
// 9·10ᵏ. An axis that spans too little to hold two powers of ten is
// labelled at 1, 2 and 5 times a power of ten, or at 1 to 9 times it, or,
// narrower still, as a linear axis.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || !(lo > 0) || !finite(hi) {
		return nil
	}
	kLo, kHi := int(math.Ceil(math.Log10(lo)-1e-9)), int(math.Floor(math.Log10(hi)+1e-9))
	if kHi-kLo < 1 {
		for _, ms := range [][]int64{{1, 2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}} {
			var ticks []plot.Tick
			for k := kLo - 1; k <= kHi; k++ {
				for _, m := range ms {
					if v := float64(m) * pow10(k); v >= lo && v <= hi {
						ticks = append(ticks, plot.Tick{Value: v, Label: decimal(m, k)})
					}
				}
			}
			if len(ticks) >= 3 && len(ticks) <= 7 {
				return ticks
			}
		}
		return niceTicks(lo, hi, 5)
	}
	every := (kHi-kLo)/7 + 1
	var ticks []plot.Tick
	for k := kLo - 1; k <= kHi; k++ {
		if k >= kLo && (k-kLo)%every == 0 {
			ticks = append(ticks, plot.Tick{Value: pow10(k), Label: power(k)})
		} else if k >= kLo {
			ticks = append(ticks, plot.Tick{Value: pow10(k)})
		}
		if every > 1 {
			continue
		}
		for m := 2; m <= 9; m++ {
			if v := float64(m) * pow10(k); v >= lo && v <= hi {
				ticks = append(ticks, plot.Tick{Value: v})
			}
		}
	}
	return ticks
}

// pow10 returns the float64 nearest 10^k.
func pow10(k int) float64 { return math.Pow10(k) }

// power writes 10^k, which the exponents handler draws as 10ᵏ.
func power(k int) string { return "10^" + strconv.Itoa(k) }

// decimal writes n·10^e: plainly (120, 0.05) when that takes at most six
// digits, else as a mantissa times a power of ten (2.5×10^7, drawn as
// 2.5×10⁷).
func decimal(n int64, e int) string { return writeDecimal(n, e, false) }

// scientific writes n·10^e always as a mantissa times a power of ten
// (8×10^5), 0 as 0.
func scientific(n int64, e int) string { return writeDecimal(n, e, true) }

func writeDecimal(n int64, e int, sci bool) string {
	if n == 0 {
		return "0"
	}
	for n%10 == 0 {
		n, e = n/10, e+1
	}
	sign := ""
	if n < 0 {
		sign = "-"
	}
	digits := strconv.FormatInt(max(n, -n), 10)
	switch {
	case sci:
	case e >= 0 && len(digits)+e <= 6:
		return sign + digits + strings.Repeat("0", e)
	case e < 0 && -e < len(digits):
		return sign + digits[:len(digits)+e] + "." + digits[len(digits)+e:]
	case e < 0 && -e <= 4:
		return sign + "0." + strings.Repeat("0", -e-len(digits)) + digits
	}
	mant := digits[:1]
	if len(digits) > 1 {
		mant += "." + digits[1:]
	}
	return sign + mant + "×" + power(e+len(digits)-1)
}

// exponents is the text handler of tick labels: what follows a "^" is an
// exponent, drawn smaller and raised, with a true minus sign. (The plot's
// font has no superscript minus, ⁰ or ⁴ to ⁹, and gonum's LaTeX handler
// has no superscripts.)
type exponents struct{ text.Plain }

var tickText = exponents{text.Plain{Fonts: font.DefaultCache}}

// split returns the base and the exponent of a label.
func split(txt string) (base, exp string) {
	base, exp, _ = strings.Cut(txt, "^")
	return base, strings.ReplaceAll(exp, "-", "−")
}

// expFont is the font of exponents, and raise how far they are raised.
func expFont(f font.Font) font.Font { f.Size = f.Size * 7 / 10; return f }
func raise(f font.Font) vg.Length   { return f.Size * 45 / 100 }

func (h exponents) Box(txt string, fnt font.Font) (width, height, depth vg.Length) {
	base, exp := split(txt)
	width, height, depth = h.Plain.Box(base, fnt)
	if exp != "" {
		ew, eh, _ := h.Plain.Box(exp, expFont(fnt))
		width += ew
		height = max(height, raise(fnt)+eh)
	}
	return width, height, depth
}

func (h exponents) Draw(c vg.Canvas, txt string, sty text.Style, pt vg.Point) {
	base, exp := split(txt)
	if exp == "" || sty.Rotation != 0 {
		h.Plain.Draw(c, base, sty, pt)
		return
	}
	w, ht, d := h.Box(txt, sty.Font)
	left := pt.X + vg.Length(sty.XAlign)*w
	baseline := pt.Y + vg.Length(sty.YAlign)*(ht+d) + d
	c.SetColor(sty.Color)
	bf := h.Fonts.Lookup(sty.Font, sty.Font.Size)
	c.FillString(bf, vg.Point{X: left, Y: baseline}, base)
	ef := expFont(sty.Font)
	c.FillString(h.Fonts.Lookup(ef, ef.Size), vg.Point{X: left + bf.Width(base), Y: baseline + raise(sty.Font)}, exp)
}
