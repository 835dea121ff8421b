package report

import (
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
)

// standIns are what a plot writes for runes its font (gonum/plot's
// default, Liberation) has no glyph for, which it would otherwise draw as
// nothing: "dᵀ ∇yy g d" came out as "dᵀ yy g d".
var standIns = map[rune]string{
	'∇': "grad ", '⁻': "-", '⁰': "0", '⁴': "4", '⁵': "5", '⁶': "6", '⁷': "7", '⁸': "8", '⁹': "9",
}

// hasGlyph reports whether the plot's font draws r.
func hasGlyph(r rune) bool {
	fnt := plot.DefaultFont
	f := font.DefaultCache.Lookup(fnt, fnt.Size)
	_, ok := f.FontFace(72).GlyphAdvance(r) // a face is not safe for concurrent use: one per call
	return ok
}

// drawable returns s with each rune the plot's font cannot draw replaced
// by its stand-in (standIns), or by "?" when it has none, so that no
// character of a title, label or legend silently disappears.
func drawable(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return !hasGlyph(r) }) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch sub, ok := standIns[r]; {
		case hasGlyph(r):
			b.WriteRune(r)
		case ok:
			b.WriteString(sub)
		default:
			b.WriteRune('?')
		}
	}
	return strings.ReplaceAll(b.String(), "  ", " ")
}
