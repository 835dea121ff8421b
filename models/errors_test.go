package models

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestErrors checks that every constructor rejects bad inputs with an
// error naming what is wrong.
func TestErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	train, val := randData(rng, 10, 3, 3), randData(rng, 6, 3, 3)
	short := train
	short.X = short.X[:29]
	empty := Data{D: 3}
	badLabel := train
	badLabel.Labels = append([]int{}, train.Labels...)
	badLabel.Labels[4] = 3
	fewLabels := train
	fewLabels.Labels = train.Labels[:9]
	noTargets := train
	noTargets.Targets = nil
	wide := randData(rng, 6, 4, 3)
	mixed := binary(train)
	mixed.Labels[0], mixed.Labels[1] = -1, 0

	for _, c := range []struct {
		name, want string
		err        error
	}{
		{"ridge short X", "training data has 29 feature values; want N·D = 10·3 = 30", second(RidgeRegression(short, val))},
		{"ridge no samples", "validation data has N = 0 samples", second(RidgeRegression(train, empty))},
		{"ridge no targets", "training data has 0 targets for N = 10", second(RidgeRegression(noTargets, val))},
		{"ridge features differ", "D = 3 features, validation data D = 4", second(RidgeRegression(train, wide))},
		{"logistic label out of range", "label 3 of sample 4 is outside [0, 3)", second(LogisticRegression(badLabel, val, 3, LogisticSettings{}))},
		{"logistic too few labels", "training data has 9 labels for N = 10", second(LogisticRegression(fewLabels, val, 3, LogisticSettings{}))},
		{"logistic one class", "1 classes", second(LogisticRegression(train, val, 1, LogisticSettings{}))},
		{"binary label 2", "label 2 of sample", second(BinaryLogisticRegression(train, binary(val), BinarySettings{}))},
		{"binary mixed 0 and −1", "mixes label 0 (sample 1) and label −1 (sample 0)", second(BinaryLogisticRegression(mixed, binary(val), BinarySettings{}))},
		{"binary penalty", "unknown Penalty", second(BinaryLogisticRegression(binary(train), binary(val), BinarySettings{Penalty: 7}))},
		{"cleaning C_r", "Cr = -1", second(HyperCleaning(train, val, 3, CleaningSettings{Cr: -1}))},
		{"cleaning no samples", "training data has N = 0", second(HyperCleaning(empty, val, 3, CleaningSettings{}))},
		{"MLP width", "Hidden = -2", second(MLP(train, val, 3, MLPSettings{Hidden: -2}))},
		{"MLP μ", "Mu = -1", second(MLP(train, val, 3, MLPSettings{Mu: -1}))},
		{"MLP activation", "unknown Activation", second(MLP(train, val, 3, MLPSettings{Activation: 5}))},
		{"MLP label", "label 3 of sample 4", second(MLP(train, badLabel, 3, MLPSettings{}))},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: error %v; want one containing %q", c.name, c.err, c.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }
