package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/countersign/countersign/cmd/config"
)

// dockerfile is the repository's Dockerfile, read into its stages.
type dockerfile struct {
	stages []*stage
}

// stage is one FROM and the instructions after it.
type stage struct {
	from, name string
	lines      []instruction
}

type instruction struct {
	cmd, args string // cmd upper-cased; args as written, continuations joined
}

func readDockerfile(t *testing.T) *dockerfile {
	t.Helper()
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var (
		d    dockerfile
		line string
	)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(text, "#") || (text == "" && line == "") {
			continue
		}
		if cont, ok := strings.CutSuffix(text, `\`); ok {
			line += cont + " "
			continue
		}
		line += text
		cmd, args, _ := strings.Cut(line, " ")
		line = ""
		in := instruction{strings.ToUpper(cmd), strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			s := &stage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			d.stages = append(d.stages, s)
			continue
		}
		if len(d.stages) == 0 {
			t.Fatalf("Dockerfile: %s before FROM", in.cmd)
		}
		d.stages[len(d.stages)-1].lines = append(d.stages[len(d.stages)-1].lines, in)
	}
	if len(d.stages) == 0 {
		t.Fatal("Dockerfile: no FROM")
	}
	return &d
}

// chain is a stage and the stages it is built FROM, the base first, and
// the image at the root.
func (d *dockerfile) chain(t *testing.T, s *stage) (image string, stages []*stage) {
	t.Helper()
	for {
		stages = append([]*stage{s}, stages...)
		i := slices.IndexFunc(d.stages, func(b *stage) bool { return b.name == s.from })
		if i < 0 {
			return s.from, stages
		}
		s = d.stages[i]
	}
}

// image is what a target builds: its root image and the instructions of
// its stages, later ones overriding.
type image struct {
	base                         string
	user, entrypoint, cmd, check string
	env                          map[string]string
	volumes                      []string
	copies                       []string
}

func (d *dockerfile) target(t *testing.T, s *stage) image {
	t.Helper()
	base, stages := d.chain(t, s)
	im := image{base: base, env: map[string]string{}}
	for _, s := range stages {
		for _, in := range s.lines {
			switch in.cmd {
			case "USER":
				im.user = in.args
			case "ENTRYPOINT":
				im.entrypoint = in.args
			case "CMD":
				im.cmd = in.args
			case "HEALTHCHECK":
				im.check = in.args
			case "COPY":
				im.copies = append(im.copies, in.args)
			case "ENV":
				k, v, ok := strings.Cut(in.args, "=")
				if !ok || strings.ContainsAny(v, " \"'") {
					t.Fatalf("Dockerfile: ENV %s: write one NAME=value a line, unquoted", in.args)
				}
				im.env[k] = v
			case "VOLUME":
				var v []string
				if err := json.Unmarshal([]byte(in.args), &v); err != nil {
					v = strings.Fields(in.args)
				}
				im.volumes = append(im.volumes, v...)
			}
		}
	}
	return im
}

// execForm decodes an instruction's JSON array, or fails: a shell form
// needs a shell, which the image does not have.
func execForm(t *testing.T, what, args string) []string {
	t.Helper()
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil || len(argv) == 0 {
		t.Fatalf("Dockerfile: %s %s is not in exec form ([\"...\"]): the image has no shell", what, args)
	}
	return argv
}

// The default target runs production serve as a non-root user on a
// distroless or scratch image, listens beyond loopback, keeps its state in
// a volume that user owns and is health-checked by the binary itself; the
// dev stack is a target of its own; every flag and COUNTERSIGN_* variable
// the Dockerfile names is one the binary has.
func TestDockerfile(t *testing.T) {
	d := readDockerfile(t)
	final := d.stages[len(d.stages)-1]
	im := d.target(t, final)

	if !strings.HasPrefix(im.base, "gcr.io/distroless/static") && im.base != "scratch" {
		t.Errorf("the default target is built on %s, want gcr.io/distroless/static or scratch", im.base)
	}
	uid, _, _ := strings.Cut(im.user, ":")
	if !regexp.MustCompile(`^[1-9][0-9]*$`).MatchString(uid) {
		t.Errorf("USER %q: want a numeric uid other than 0 (Kubernetes' runAsNonRoot verifies only numbers)", im.user)
	}
	entry := execForm(t, "ENTRYPOINT", im.entrypoint)
	argv := append(entry, execForm(t, "CMD", im.cmd)...)
	if len(argv) < 2 || filepath.Base(argv[0]) != "countersign" || argv[1] != "serve" || slices.Contains(argv, "--dev") {
		t.Errorf("the default target runs %q, want countersign serve without --dev", argv)
	}
	for k, v := range map[string]string{"COUNTERSIGN_LISTEN": "0.0.0.0:8080", "COUNTERSIGN_DATA": "/data"} {
		if im.env[k] != v {
			t.Errorf("ENV %s=%q, want %q", k, im.env[k], v)
		}
	}
	if !slices.Contains(im.volumes, "/data") {
		t.Errorf("VOLUME %v does not declare /data", im.volumes)
	}
	owned := slices.ContainsFunc(im.copies, func(c string) bool {
		f := strings.Fields(c)
		return slices.Contains(f, "--chown="+im.user) && f[len(f)-1] == "/data"
	})
	if !owned {
		t.Errorf("no COPY --chown=%s ... /data: the non-root user could not write its state", im.user)
	}
	check, ok := strings.CutPrefix(im.check, "CMD ")
	if hc := execForm(t, "HEALTHCHECK CMD", strings.TrimSpace(check)); !ok || len(hc) < 2 || hc[0] != entry[0] || hc[1] != "healthcheck" {
		t.Errorf("HEALTHCHECK %s, want CMD [%q, \"healthcheck\"]", im.check, entry[0])
	}

	i := slices.IndexFunc(d.stages, func(s *stage) bool { return s.name == "dev" })
	if i < 0 {
		t.Fatal("no stage named dev: the dev stack needs a target of its own (docker build --target dev)")
	}
	dev := d.target(t, d.stages[i])
	if devArgv := execForm(t, "CMD", dev.cmd); !slices.Equal(devArgv, []string{"serve", "--dev"}) {
		t.Errorf("the dev target runs %q, want serve --dev", devArgv)
	}

	root := newRootCmd()
	for _, s := range d.stages {
		im := d.target(t, s)
		for _, args := range []string{im.cmd, strings.TrimPrefix(im.check, "CMD ")} {
			if args == "" {
				continue
			}
			argv := execForm(t, "CMD", args)
			if argv[0] == entry[0] {
				argv = argv[1:]
			}
			sub, rest, err := root.Find(argv)
			if err != nil || sub == root {
				t.Errorf("stage %s runs countersign %q, which is no command", s.name, argv)
				continue
			}
			for _, a := range rest {
				if name, ok := strings.CutPrefix(a, "--"); ok && sub.Flags().Lookup(strings.SplitN(name, "=", 2)[0]) == nil {
					t.Errorf("stage %s: countersign %s has no %s", s.name, sub.Name(), a)
				}
			}
		}
		for k := range im.env {
			if !strings.HasPrefix(k, config.EnvPrefix) {
				continue
			}
			var found bool
			newServeCmd().Flags().VisitAll(func(f *pflag.Flag) { found = found || config.EnvName(f.Name) == k })
			if !found {
				t.Errorf("stage %s: ENV %s sets no flag of serve", s.name, k)
			}
		}
	}
}

// The default target's command, run as the container runs it (its
// environment, no other configuration), refuses to start with one message
// naming every setting it lacks and how to give it; with those settings
// in a file named by COUNTERSIGN_CONFIG it starts, and healthcheck, as the
// HEALTHCHECK runs it, finds it ready; SIGTERM stops it cleanly.
func TestContainerCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts serve")
	}
	d := readDockerfile(t)
	im := d.target(t, d.stages[len(d.stages)-1])
	argv := append(execForm(t, "ENTRYPOINT", im.entrypoint), execForm(t, "CMD", im.cmd)...)[1:]
	if !slices.Equal(argv, []string{"serve"}) {
		// Flags in the command (--data /data) would act on this machine's
		// paths and ports, not a container's.
		t.Fatalf("the default command is countersign %q, want serve configured by the environment alone", argv)
	}
	bin := filepath.Join(t.TempDir(), "countersign")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The container's environment, but its address on this machine's
	// loopback and its volume in a temporary directory.
	containerEnv := func(listen string, more ...string) []string {
		env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
		for k, v := range im.env {
			switch k {
			case "COUNTERSIGN_LISTEN":
				v = listen
			case "COUNTERSIGN_DATA":
				v = t.TempDir()
			}
			env = append(env, k+"="+v)
		}
		return append(env, more...)
	}

	t.Run("without configuration it names every missing setting", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, argv...)
		cmd.Env = containerEnv("127.0.0.1:0")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("exit: %v, want status 1\n%s", err, &stderr)
		}
		for _, w := range []string{"--agent", "--ledger", "--orders", "--issuer must", "--issuer-jwks", "COUNTERSIGN_NAME", "--config"} {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("stderr does not say %q:\n%s", w, &stderr)
			}
		}
		if strings.Contains(stderr.String(), "--data") {
			t.Errorf("asks for --data, which COUNTERSIGN_DATA gives:\n%s", &stderr)
		}
	})

	t.Run("configured by a file and the environment it starts", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		bundle, err := filepath.Abs("../../bundles/releases/p1.tar.gz")
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "countersign.yaml")
		text := fmt.Sprintf("agent: support-agent\nledger: http://127.0.0.1:1\norders: http://127.0.0.1:1\nissuer: idp\nissuer-jwks: %s\nbundle: %s\n", publicJWKSFile(t), bundle)
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, argv...)
		cmd.Env = containerEnv(addr, "COUNTERSIGN_CONFIG="+file)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		first := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(stdout)
			sc.Scan() // EOF, when serve exits, gives ""
			first <- sc.Text()
		}()
		select {
		case line := <-first:
			if !strings.HasPrefix(line, "countersign sidecar on http://"+addr) {
				_ = cmd.Wait()
				t.Fatalf("serve printed %q, want it serving on %s\n%s", line, addr, &stderr)
			}
		case <-time.After(90 * time.Second):
			t.Fatalf("serve did not start in 90s\n%s", &stderr)
		}
		hc := exec.Command(bin, "healthcheck")
		hc.Env = containerEnv(addr)
		if out, err := hc.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "ready" {
			t.Errorf("healthcheck: %v, %s", err, out)
		}
		if !strings.Contains(stderr.String(), `"from_file":["agent","bundle","issuer","issuer-jwks","ledger","orders"]`) {
			t.Errorf("the log does not say which settings came from the file:\n%s", &stderr)
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("serve ended with %v after SIGTERM, want status 0\n%s", err, &stderr)
		}
	})
}

// publicJWKSFile writes a JWKS with one public key, as an identity
// provider publishes it.
func publicJWKSFile(t *testing.T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return writeJWKS(t, pub)
}
