package policy

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing/fstest"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/countersign/countersign/executor/money"
)

// Bounds on a bundle. They hold for every source, so that a bundle built
// from a directory can always be uploaded too. A bundle is a few small text
// files (p1 is 9 files, 40 KiB unpacked, 9 KiB packed); these leave room for
// growth and none for a decompression bomb: gzip reaches ratios near 1000:1,
// so the unpacked bound, not the archive's size, is what caps the work.
// A bundle over any of them is ErrBundleTooLarge.
const (
	MaxArchiveBytes  = 1 << 20 // the .tar.gz itself (the API's body limit)
	MaxUnpackedBytes = 4 << 20 // the whole decompressed tar stream, headers included
	MaxFiles         = 64      // tar entries, directories included
)

// revisionPattern is the shape of a bundle revision. The revision appears in
// every decision, the history and the audit log, so it is a short name, not
// free text.
var revisionPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

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
	autonomy Autonomy
	changes  []LimitChange
	// figures are the numbers of the limit table its data holds; modules
	// its Rego files, sorted by path; data its data document, as JSON.
	figures figures
	modules []Module
	data    []byte
	// forbidden is set when the production modules call a built-in outside
	// Capabilities; the queries are then compiled without the allowlist,
	// and only an engine without it (a test knob) activates the bundle.
	forbidden *ForbiddenBuiltinError

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

// Autonomy is what the bundle's data says of modes and the breaker.
func (b *Bundle) Autonomy() Autonomy { return b.autonomy }

// LimitChanges are the limit changes its .manifest declares.
func (b *Bundle) LimitChanges() []LimitChange { return slices.Clone(b.changes) }

// Modules are the bundle's Rego files, sorted by path, its tests among
// them (Module.Test).
func (b *Bundle) Modules() []Module { return slices.Clone(b.modules) }

// Data is the bundle's data document as JSON: what data.json (and any
// other data file) holds, merged as OPA merges them.
func (b *Bundle) Data() json.RawMessage { return bytes.Clone(b.data) }

// Module is one Rego file of a bundle.
type Module struct {
	// Path is the file's path in the bundle ("/call/call.rego").
	Path string
	// Text is the file as written.
	Text string
	// Test is set for a *_test.rego file: the gate runs its tests, and no
	// decision ever evaluates it.
	Test   bool
	parsed *ast.Module
}

// Parsed returns a copy of the module as OPA parsed it: what a decision
// evaluates, without the comments and the layout of Text.
func (m Module) Parsed() *ast.Module { return m.parsed.Copy() }

func modulesOf(raw bundle.Bundle) []Module {
	out := make([]Module, 0, len(raw.Modules))
	for _, m := range raw.Modules {
		out = append(out, Module{Path: m.Path, Text: string(m.Raw), Test: isTestFile(m.Path), parsed: m.Parsed})
	}
	slices.SortFunc(out, func(a, b Module) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// Forbidden is the bundle's call of a built-in outside Capabilities, or nil.
// An engine refuses such a bundle on every path; loading it succeeds only so
// that the refusal is recorded and names the call.
func (b *Bundle) Forbidden() error {
	if b.forbidden == nil {
		return nil
	}
	return b.forbidden
}

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
	if err := checkRevision(raw.Manifest.Revision); err != nil {
		return nil, err
	}
	limits, err := decodeLimits(raw.Data)
	if err != nil {
		return nil, err
	}
	autonomy, err := decodeAutonomy(raw.Data, limits)
	if err != nil {
		return nil, err
	}
	fig := figuresOf(raw.Data)
	changes, err := decodeLimitChanges(raw.Manifest.Metadata, fig)
	if err != nil {
		return nil, err
	}
	doc, err := json.Marshal(raw.Data)
	if err != nil {
		return nil, fmt.Errorf("%w: data: %v", ErrInvalidBundle, err)
	}
	sum := sha256.Sum256(data)
	b := &Bundle{
		revision: raw.Manifest.Revision,
		digest:   hex.EncodeToString(sum[:]),
		archive:  bytes.Clone(data),
		limits:   limits,
		autonomy: autonomy,
		changes:  changes,
		figures:  fig,
		modules:  modulesOf(raw),
		data:     doc,
	}
	if err := b.prepare(raw); err != nil {
		return nil, err
	}
	return b, nil
}

// readBundle parses the archive with OPA. The gate reads it again for a
// private copy: OPA's tester activates the bundle into a store and must not
// share anything with the prepared queries. A signature is not checked
// here (OPA would refuse any signed bundle without a key): that is
// Verifier's job, on the engine's paths that require one.
func readBundle(data []byte) (bundle.Bundle, error) {
	raw, err := bundle.NewReader(bytes.NewReader(data)).
		WithSkipBundleVerification(true).
		WithRegoVersion(ast.RegoV1).
		WithSizeLimitBytes(MaxUnpackedBytes).
		Read()
	if err != nil {
		return bundle.Bundle{}, fmt.Errorf("%w: %v", ErrInvalidBundle, err)
	}
	return raw, nil
}

// checkRevision refuses a revision that is not a short name, or that is
// shaped like a token: the audit log refuses to hold anything that looks
// like a JWT, so such a revision could never be recorded.
func checkRevision(rev string) error {
	switch {
	case rev == "":
		return fmt.Errorf("%w: .manifest has no revision", ErrInvalidBundle)
	case !revisionPattern.MatchString(rev):
		return fmt.Errorf("%w: revision %q must match %s", ErrInvalidBundle, rev, revisionPattern)
	case tokenShaped(rev):
		return fmt.Errorf("%w: revision %q is shaped like a token (a dotted part decodes to JSON); name the bundle, e.g. p4 or 2025.06.01", ErrInvalidBundle, rev)
	}
	return nil
}

// tokenShaped reports whether a dot-separated part of s decodes from
// base64url to a JSON object, as a JOSE header does. It is broader than the
// audit log's check (which also wants "alg" and two parts after it), so
// anything the log would refuse is refused here first.
func tokenShaped(s string) bool {
	for _, part := range strings.Split(s, ".") {
		b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(part, "="))
		if err == nil && json.Valid(b) && bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
			return true
		}
	}
	return false
}

// prepare compiles the production modules once, under Capabilities, and
// prepares both queries against them and the bundle's data. A bundle that
// fails only because it calls a forbidden built-in is compiled again
// without the allowlist and marked, so that the engine can name the call
// when it refuses it (and a test engine without the allowlist can run it).
func (b *Bundle) prepare(raw bundle.Bundle) error {
	modules := map[string]*ast.Module{}
	for _, m := range raw.Modules {
		if !isTestFile(m.Path) {
			modules[m.Path] = m.Parsed
		}
	}
	compiler := newCompiler(Capabilities())
	if compiler.Compile(modules); compiler.Failed() {
		b.forbidden = forbiddenIn(compiler.Errors)
		if b.forbidden == nil {
			return fmt.Errorf("%w: %v", ErrInvalidBundle, compiler.Errors)
		}
		compiler = newCompiler(allCapabilities())
		if compiler.Compile(modules); compiler.Failed() {
			return fmt.Errorf("%w: %v", ErrInvalidBundle, compiler.Errors)
		}
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

func newCompiler(caps *ast.Capabilities) *ast.Compiler {
	return ast.NewCompiler().WithCapabilities(caps).WithDefaultRegoVersion(ast.RegoV1)
}

func isTestFile(p string) bool { return strings.HasSuffix(p, "_test.rego") }

// scanArchive walks the tar.gz before OPA does and refuses anything but a
// bounded number of regular files with clean relative paths.
func scanArchive(data []byte) error {
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: not a gzip archive: %v", ErrInvalidBundle, err)
	}
	// Count what the stream yields, headers included, not what headers
	// claim: a bomb of empty directory entries has no file bytes at all.
	stream := &boundedReader{r: gz, left: MaxUnpackedBytes}
	tr := tar.NewReader(stream)
	seen := map[string]bool{}
	for entries := 1; ; entries++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return tarError(err, "not a tar archive")
		}
		if entries > MaxFiles {
			return fmt.Errorf("%w: more than %d entries", ErrBundleTooLarge, MaxFiles)
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
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return tarError(err, "reading "+name)
		}
	}
	// The tar ends at its first two zero blocks; the gzip stream may go on.
	// Read it to its end under the same bound, so that a stream of zeros
	// (the classic bomb, an empty tar to the tar reader) is too large, not
	// an empty archive, and the gzip checksum is checked.
	if _, err := io.Copy(io.Discard, stream); err != nil {
		return tarError(err, "reading past the end of the tar")
	}
	if len(seen) == 0 {
		return fmt.Errorf("%w: archive holds no files", ErrInvalidBundle)
	}
	return nil
}

// errTooMuchData is what boundedReader fails with past its bound.
var errTooMuchData = fmt.Errorf("%w: more than %d bytes unpacked", ErrBundleTooLarge, MaxUnpackedBytes)

// boundedReader fails with errTooMuchData once more than left bytes are read.
type boundedReader struct {
	r    io.Reader
	left int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errTooMuchData
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.r.Read(p)
	if b.left -= int64(n); b.left < 0 {
		return n, errTooMuchData
	}
	return n, err
}

// tarError keeps a bound that was passed (ErrBundleTooLarge) and makes
// anything else an invalid bundle.
func tarError(err error, what string) error {
	if errors.Is(err, ErrBundleTooLarge) {
		return err
	}
	return fmt.Errorf("%w: %s: %v", ErrInvalidBundle, what, err)
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

// Source returns the bundle directory of a new revision built from the
// policy source: the .rego files of rego (tests included: the gate runs
// them), data as data.json, and a .manifest with the revision, roots
// ["countersign"], rego_version 1 and, when there are changes,
// metadata.limit_changes. Build packs it; LoadFS checks it.
func Source(rego fs.FS, data []byte, revision string, changes []LimitChange) (fs.FS, error) {
	fsys, err := copyFS(rego)
	if err != nil {
		return nil, fmt.Errorf("policy: bundle source: %w", err)
	}
	maps.DeleteFunc(fsys, func(p string, _ *fstest.MapFile) bool { return path.Ext(p) != ".rego" })
	if len(fsys) == 0 {
		return nil, fmt.Errorf("policy: bundle source: %w: no .rego files", ErrInvalidBundle)
	}
	type metadata struct {
		LimitChanges []LimitChange `json:"limit_changes"`
	}
	manifest := struct {
		Revision    string    `json:"revision"`
		Roots       []string  `json:"roots"`
		RegoVersion int       `json:"rego_version"`
		Metadata    *metadata `json:"metadata,omitempty"`
	}{Revision: revision, Roots: []string{"countersign"}, RegoVersion: 1}
	if len(changes) > 0 {
		manifest.Metadata = &metadata{LimitChanges: changes}
	}
	m, err := json.MarshalIndent(manifest, "", "  ")
	if err != nil {
		return nil, err
	}
	fsys[".manifest"] = &fstest.MapFile{Data: append(m, '\n')}
	fsys["data.json"] = &fstest.MapFile{Data: data}
	return fsys, nil
}

// copyFS reads the regular files of fsys into memory.
func copyFS(fsys fs.FS) (fstest.MapFS, error) {
	out := fstest.MapFS{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%w: %s is not a regular file", ErrInvalidBundle, p)
		}
		body, err := fs.ReadFile(fsys, p)
		out[p] = &fstest.MapFile{Data: body, Mode: 0o644}
		return err
	})
	return out, err
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
