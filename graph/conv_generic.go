//go:build !amd64 || purego

package graph

// patchRow copies the patches of an output row from pad to col, or with
// add adds col's back into pad (see patchRowGo).
func patchRow[T float](col, pad []T, base, ow, ch, plane, pw int, p convParams, add bool) {
	patchRowGo(col, pad, base, ow, ch, plane, pw, p, add)
}
