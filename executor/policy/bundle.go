package policy

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/countersign/countersign/executor/money"
)

// Bounds on a bundle. They hold for every source, so that a bundle built
// from a directory can always be uploaded too. A bundle is a few small text
// files; these leave room for growth and none for a decompression bomb.
const (
	MaxArchiveBytes  = 1 << 20 // the .tar.gz itself (the API's body limit)
	MaxUnpackedBytes = 4 << 20 // all files together, decompressed
	MaxFiles         = 64
)

// The queries the engine prepares for every bundle.
const (
	callQuery     = "data.countersign.call.decision"
	approverQuery = "data.countersign.approver.verdict"
)

// Bundle is a loaded policy bundle, compiled and ready to evaluate. It is
// immutable and safe for concurrent use.
type Bundle struct {
	revision string
	digest   string
	archive  []byte
	limits   Limits

	call     rego.PreparedEvalQuery
	approver rego.PreparedEvalQuery
}

// Revision is the bundle's revision from its .manifest ("p1").
func (b *Bundle) Revision() string { return b.revision }

// Digest is the hex sha256 of the bundle's .tar.gz bytes.
func (b *Bundle) Digest() string { return b.digest }

// Archive is the bundle as .tar.gz bytes, from which LoadArchive loads it
// again (after a restart, for example). Callers must not modify it.
func (b *Bundle) Archive() []byte { return b.archive }

// Limits are the bundle's limits.
func (b *Bundle) Limits() Limits { return b.limits }

// LoadPath loads a bundle from a directory or a .tar.gz file.
func LoadPath(p string) (*Bundle, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("policy: load bundle: %w", err)
	}
	if fi.IsDir() {
		return LoadDir(p)
	}
	return LoadFile(p)
}

// LoadDir loads a bundle directory (a .manifest, data.json and .rego files).
func LoadDir(dir string) (*Bundle, error) { return LoadFS(os.DirFS(dir)) }

// LoadFS loads a bundle from the root of fsys, for example an embedded one.
// Its digest is that of the archive Build makes of it.
func LoadFS(fsys fs.FS) (*Bundle, error) {
	archive, err := Build(fsys)
	if err != nil {
		return nil, err
	}
	return LoadArchive(archive)
}

// LoadFile loads a .tar.gz bundle file.
func LoadFile(name string) (*Bundle, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("policy: load bundle: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxArchiveBytes+1))
	if err != nil {
		return nil, fmt.Errorf("policy: load bundle %s: %w", name, err)
	}
	return LoadArchive(data)
}

// LoadArchive loads a bundle from .tar.gz bytes, such as an upload. It
// checks the bounds and the paths before OPA parses anything, then compiles
// the policy without its *_test.rego files and prepares the queries once.
func LoadArchive(data []byte) (*Bundle, error) {
	if len(data) > MaxArchiveBytes {
		return nil, fmt.Errorf("%w: archive is over %d bytes", ErrBundleTooLarge, MaxArchiveBytes)
	}
	if err := scanArchive(data); err != nil {
		return nil, err
	}
	raw, err := readBundle(data)
	if err != nil {
		return nil, err
	}
	if raw.Manifest.Revision == "" {
		return nil, fmt.Errorf("%w: .manifest has no revision", ErrInvalidBundle)
	}
	limits, err := decodeLimits(raw.Data)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	b := &Bundle{
		revision: raw.Manifest.Revision,
		digest:   hex.EncodeToString(sum[:]),
		archive:  bytes.Clone(data),
		limits:   limits,
	}
	if err := b.prepare(raw); err != nil {
		return nil, err
	}
	return b, nil
}

// readBundle parses the archive with OPA. The gate reads it again for a
// private copy: OPA's tester activates the bundle into a store and must not
// share anything with the prepared queries.
func readBundle(data []byte) (bundle.Bundle, error) {
	raw, err := bundle.NewReader(bytes.NewReader(data)).
		WithRegoVersion(ast.RegoV1).
		WithSizeLimitBytes(MaxUnpackedBytes).
		Read()
	if err != nil {
		return bundle.Bundle{}, fmt.Errorf("%w: %v", ErrInvalidBundle, err)
	}
	return raw, nil
}

// prepare compiles the production modules once and prepares both queries
// against them and the bundle's data.
func (b *Bundle) prepare(raw bundle.Bundle) error {
	modules := map[string]*ast.Module{}
	for _, m := range raw.Modules {
		if !isTestFile(m.Path) {
			modules[m.Path] = m.Parsed
		}
	}
	compiler := ast.NewCompiler().WithDefaultRegoVersion(ast.RegoV1)
	if compiler.Compile(modules); compiler.Failed() {
		return fmt.Errorf("%w: %v", ErrInvalidBundle, compiler.Errors)
	}
	// AST values on read spare a conversion of the limits on every decision.
	store := inmem.NewFromObjectWithOpts(raw.Data, inmem.OptReturnASTValuesOnRead(true))
	ctx := context.Background()
	for _, q := range []struct {
		query string
		dst   *rego.PreparedEvalQuery
	}{{callQuery, &b.call}, {approverQuery, &b.approver}} {
		pq, err := rego.New(rego.Query(q.query), rego.Compiler(compiler), rego.Store(store)).PrepareForEval(ctx)
		if err != nil {
			return fmt.Errorf("%w: prepare %s: %v", ErrInvalidBundle, q.query, err)
		}
		*q.dst = pq
	}
	return nil
}

func isTestFile(p string) bool { return strings.HasSuffix(p, "_test.rego") }

// scanArchive walks the tar.gz before OPA does and refuses anything but a
// bounded number of regular files with clean relative paths.
func scanArchive(data []byte) error {
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: not a gzip archive: %v", ErrInvalidBundle, err)
	}
	tr := tar.NewReader(gz)
	seen := map[string]bool{}
	var unpacked int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: not a tar archive: %v", ErrInvalidBundle, err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
		default:
			return fmt.Errorf("%w: %q is not a regular file", ErrInvalidBundle, h.Name)
		}
		name, ok := cleanPath(h.Name)
		if !ok {
			return fmt.Errorf("%w: unsafe path %q", ErrInvalidBundle, h.Name)
		}
		if seen[name] {
			return fmt.Errorf("%w: %q appears twice", ErrInvalidBundle, name)
		}
		seen[name] = true
		if len(seen) > MaxFiles {
			return fmt.Errorf("%w: more than %d files", ErrBundleTooLarge, MaxFiles)
		}
		// Count what the stream yields, not what the header claims.
		n, err := io.Copy(io.Discard, io.LimitReader(tr, MaxUnpackedBytes-unpacked+1))
		if err != nil {
			return fmt.Errorf("%w: reading %q: %v", ErrInvalidBundle, name, err)
		}
		if unpacked += n; unpacked > MaxUnpackedBytes {
			return fmt.Errorf("%w: more than %d bytes unpacked", ErrBundleTooLarge, MaxUnpackedBytes)
		}
	}
	if len(seen) == 0 {
		return fmt.Errorf("%w: archive holds no files", ErrInvalidBundle)
	}
	return nil
}

// cleanPath accepts "/a/b.rego" and "a/b.rego" (OPA writes the former) and
// refuses anything that could climb out of the bundle: ".." or "."
// elements, empty elements, backslashes.
func cleanPath(name string) (string, bool) {
	p := strings.TrimPrefix(name, "/")
	if p == "" || strings.Contains(p, `\`) || !fs.ValidPath(p) {
		return "", false
	}
	return p, true
}

// Build makes the .tar.gz of the bundle directory at the root of fsys. The
// output depends only on the files' paths and contents (sorted paths, zero
// times and owners, fixed modes), so the same directory always has the same
// digest, whoever builds it.
func Build(fsys fs.FS) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf) // no name, zero ModTime: nothing host-specific
	tw := tar.NewWriter(gz)
	var files int
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%w: %s is not a regular file", ErrInvalidBundle, p)
		}
		if files++; files > MaxFiles {
			return fmt.Errorf("%w: more than %d files", ErrBundleTooLarge, MaxFiles)
		}
		body, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		h := &tar.Header{
			Name:     "/" + p,
			Mode:     0o644,
			Size:     int64(len(body)),
			Typeflag: tar.TypeReg,
			ModTime:  time.Unix(0, 0),
			Format:   tar.FormatPAX,
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = tw.Write(body)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("policy: build bundle: %w", err)
	}
	if files == 0 {
		return nil, fmt.Errorf("policy: build bundle: %w: no files", ErrInvalidBundle)
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeLimits reads data.countersign.limits and reports every problem at
// once, so a bundle author fixes them in one round.
func decodeLimits(data map[string]any) (Limits, error) {
	cs, _ := data["countersign"].(map[string]any)
	raw, ok := cs["limits"].(map[string]any)
	if !ok {
		return Limits{}, fmt.Errorf("%w: data.countersign.limits is missing", ErrInvalidBundle)
	}
	var problems []string
	get := func(key string) int64 {
		n, ok := wholePositive(raw[key])
		if !ok {
			problems = append(problems, fmt.Sprintf("%s must be a whole number above zero, got %v", key, raw[key]))
		}
		return n
	}
	seconds := func(key string) time.Duration {
		n := get(key)
		if n > math.MaxInt64/int64(time.Second) {
			problems = append(problems, key+" is too large")
		}
		return time.Duration(n) * time.Second
	}
	l := Limits{
		RefundAuto:          money.Cents(get("refund_auto")),
		RefundMax:           money.Cents(get("refund_max")),
		ReshipApprovalValue: money.Cents(get("reship_approval_value")),
		RepDaily:            money.Cents(get("rep_daily")),
		RepWindow:           seconds("rep_window_seconds"),
		AgentHourly:         money.Cents(get("agent_hourly")),
		ApprovalTTL:         seconds("approval_ttl_seconds"),
		TokenTTL:            seconds("token_ttl_seconds"),
	}
	if len(problems) > 0 {
		return Limits{}, fmt.Errorf("%w: data.countersign.limits: %s", ErrInvalidBundle, strings.Join(problems, "; "))
	}
	return l, nil
}

func wholePositive(v any) (int64, bool) {
	var n int64
	switch x := v.(type) {
	case json.Number:
		i, err := x.Int64()
		if err != nil {
			return 0, false
		}
		n = i
	case float64: // data.yaml decodes numbers as floats
		if x != math.Trunc(x) || x > math.MaxInt64 {
			return 0, false
		}
		n = int64(x)
	default:
		return 0, false
	}
	return n, n > 0
}
