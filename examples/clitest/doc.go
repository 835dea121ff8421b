// Package clitest checks that every program under examples/ follows the
// command-line conventions of examples/README.md. It has no code of its own:
// its test builds each program and reads its -h.
package clitest
