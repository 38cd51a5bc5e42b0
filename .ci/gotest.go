//go:build ignore

// gotest reads `go test -json` on standard input and says what is
// happening as it goes: each package as it ends (ok or FAIL, with its
// time), the whole output of every test that fails, and with -v the
// output of every test (the matrix tables) less the === RUN, PAUSE and
// CONT lines. It adds the tests that passed and failed (subtests too) to
// the counts in the file named by -counts, "passed failed" on one line,
// for .ci/run's closing line, and exits 1 if anything failed, a package
// that did not build included. A package that fails with no failing test
// (it did not build, it timed out, TestMain failed) counts as one failed
// test, so the closing line never says 0 failed of a run that failed.
//
// Every -heartbeat (45s) without a package ending it prints one line
// naming the -group and the packages still running, with how long each
// has run, so that a long package (the drill, the sidecar's HTTP tests)
// is not minutes of silence.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

// line is one line of go test's output: an event, or plain text (a build
// failure) when it does not decode.
type line struct {
	e    event
	text string
}

func main() {
	verbose := flag.Bool("v", false, "print every test's output")
	counts := flag.String("counts", "", "file of the running counts, \"passed failed\"")
	group := flag.String("group", "go test", "what the heartbeat lines name this run")
	heartbeat := flag.Duration("heartbeat", 45*time.Second, "the longest silence before a line naming the packages still running")
	flag.Parse()

	var passed, failed int
	if b, err := os.ReadFile(*counts); err == nil {
		fmt.Sscan(string(b), &passed, &failed)
	}
	// outputs holds each running test's output until it ends, so that a
	// failure is printed whole and together.
	outputs := map[string][]string{}
	// running holds when each package still running started; testsFailed
	// the packages one of whose tests failed.
	running := map[string]time.Time{}
	testsFailed := map[string]bool{}
	done := 0
	bad := false
	lines := make(chan line)
	go read(lines)
	tick := time.NewTicker(*heartbeat)
	defer tick.Stop()
	for {
		var l line
		var ok bool
		select {
		case l, ok = <-lines:
		case <-tick.C:
			fmt.Println(stillRunning(*group, running, done, time.Now()))
			continue
		}
		if !ok {
			break
		}
		if l.text != "" {
			// go test prints build failures as plain text.
			fmt.Println(l.text)
			bad = true
			continue
		}
		e := l.e
		key := e.Package + " " + e.Test
		if e.Test == "" {
			switch e.Action {
			case "start":
				running[e.Package] = time.Now()
			case "pass", "skip", "fail":
				delete(running, e.Package)
				done++
				tick.Reset(*heartbeat)
			}
		}
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
				testsFailed[e.Package] = true
			} else {
				fmt.Printf("FAIL %s %.1fs\n", e.Package, e.Elapsed)
				if !testsFailed[e.Package] {
					failed++
				}
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

// read sends each line of standard input, decoded when it is an event,
// and closes lines at its end.
func read(lines chan<- line) {
	defer close(lines)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	for in.Scan() {
		var e event
		if err := json.Unmarshal(in.Bytes(), &e); err != nil {
			lines <- line{text: in.Text()}
			continue
		}
		lines <- line{e: e}
	}
}

// stillRunning is the heartbeat: the group, how many packages ended, and
// each package still running, the longest running first.
func stillRunning(group string, running map[string]time.Time, done int, now time.Time) string {
	if len(running) == 0 {
		return fmt.Sprintf("... %s: %d packages done, the next still building", group, done)
	}
	pkgs := make([]string, 0, len(running))
	for p := range running {
		pkgs = append(pkgs, p)
	}
	slices.SortFunc(pkgs, func(a, b string) int { return running[a].Compare(running[b]) })
	for i, p := range pkgs {
		pkgs[i] = fmt.Sprintf("%s (%s)", p, now.Sub(running[p]).Round(time.Second))
	}
	return fmt.Sprintf("... %s: %d packages done, still running: %s", group, done, strings.Join(pkgs, ", "))
}
