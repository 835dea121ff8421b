// Package data provides the plain-array data sets, readers and samplers used
// by the bilevel optimization toolkit. It knows nothing of automatic
// differentiation: every data set is a row-major []float64 matrix and a
// []int of labels.
//
// # Files
//
// ReadIDX and ReadIDXFile parse the IDX format of MNIST and Fashion-MNIST,
// raw or gzip-compressed. An IDX file is a 4-byte magic number
// 0x00 0x00 type ndim, ndim big-endian uint32 dimensions and then the
// big-endian payload of dims[0]·dims[1]···dims[ndim-1] elements. Every error
// names the file, when known, and the byte offset in the decompressed stream
// where the problem lies. WriteIDX is the inverse of ReadIDX.
//
// # Data sets
//
// A Dataset holds N samples of dimension D as the N×D row-major matrix X, with
// integer labels in [0, Classes). FromIDX scales unsigned-byte pixels to
// [0, 1]. LoadFashionMNIST reads the full Fashion-MNIST set (60000 training
// and 10000 test images of 28×28 pixels, 10 classes) from the files of the
// Debian package dataset-fashion-mnist, and EmbeddedFashionMNIST returns a
// class-balanced real subset (4000 training and 1000 test images) compiled
// into the package, so that examples and tests run with no set-up.
//
// For data hyper-cleaning, CorruptLabels replaces each label, with
// probability p, by a class drawn uniformly from all Classes classes (which
// may coincide with the true one), and reports both which labels were redrawn
// and which actually changed.
//
// # Randomness
//
// Everything random is seeded. All generators use a math/rand/v2 PCG source
// and draw from it only through this package's own routines (bounded
// integers by Lemire's method, Fisher–Yates shuffles, polar-method normals),
// so a seed gives the same numbers on every Go release. Sampler and
// ReplacementSampler draw minibatches of indices; their state, including the
// PCG state, round-trips through MarshalBinary and UnmarshalBinary for
// checkpoints.
//
// # Generators
//
// LogisticData draws the synthetic logistic-regression data of paper 002
// §4.1: Gaussian features x ~ N(0, r²I), a Gaussian ground-truth weight w,
// responses w·x + 0.1z thresholded at their median. SPD fills an n×n
// symmetric positive definite matrix Q·diag(λ)·Qᵀ with a Haar-random
// orthogonal Q and eigenvalues λ geometrically spaced in [1, cond].
//
// # Few-shot tasks
//
// TaskSampler draws N-way K-shot classification tasks for meta-learning. Its
// classes are the base classes of an image Dataset times the four rotations
// by 0, 90, 180 and 270 degrees; SplitClasses partitions the base classes
// into meta-train, meta-validation and meta-test, so no rotation of a test
// class is ever seen in training.
package data
