//go:build ignore

// gotest reads `go test -json` on standard input and says what is
// happening as it goes: each package as it ends (ok or FAIL, with its
// time), the whole output of every test that fails, and with -v the
// output of every test (the matrix tables) less the === RUN, PAUSE and
// CONT lines. It adds the tests that passed and failed (subtests too) to
// the counts in the file named by -counts, "passed failed" on one line,
// for .ci/run's closing line, and exits 1 if anything failed, a package
// that did not build included.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

func main() {
	verbose := flag.Bool("v", false, "print every test's output")
	counts := flag.String("counts", "", "file of the running counts, \"passed failed\"")
	flag.Parse()

	var passed, failed int
	if b, err := os.ReadFile(*counts); err == nil {
		fmt.Sscan(string(b), &passed, &failed)
	}
	// outputs holds each running test's output until it ends, so that a
	// failure is printed whole and together.
	outputs := map[string][]string{}
	bad := false
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	for in.Scan() {
		var e event
		if err := json.Unmarshal(in.Bytes(), &e); err != nil {
			// go test prints build failures as plain text.
			fmt.Println(in.Text())
			bad = true
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			if *verbose && !strings.HasPrefix(e.Output, "=== ") {
				fmt.Print(e.Output)
			}
			if !*verbose {
				outputs[key] = append(outputs[key], e.Output)
			}
		case "pass", "skip":
			if e.Test == "" {
				fmt.Printf("ok   %s %.1fs\n", e.Package, e.Elapsed)
			} else if e.Action == "pass" {
				passed++
			}
			delete(outputs, key)
		case "build-output":
			fmt.Print(e.Output)
		case "build-fail":
			bad = true
		case "fail":
			bad = true
			if e.Test != "" {
				failed++
			} else {
				fmt.Printf("FAIL %s %.1fs\n", e.Package, e.Elapsed)
			}
			fmt.Print(strings.Join(outputs[key], ""))
			delete(outputs, key)
		}
	}
	if err := os.WriteFile(*counts, []byte(fmt.Sprintf("%d %d\n", passed, failed)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gotest:", err)
		os.Exit(2)
	}
	if bad {
		os.Exit(1)
	}
}
