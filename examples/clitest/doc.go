// Package clitest checks that every program under examples/ follows the
// command-line conventions of examples/README.md: its test builds each
// program, reads its -h and tries bad values. FuzzFlags is the fuzz test
// of a program's flag parsing, which each program's tests call.
package clitest
