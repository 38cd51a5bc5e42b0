package manifests

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/template"
	"unicode"
)

// Placeholder is in every value an operator must fill in, so that one
// search finds them all and none of them resolves or parses by accident
// (the URLs' hosts are under .invalid, RFC 2606).
const Placeholder = "REPLACE-ME"

// DefaultImage is the image reference without --image: what
// `docker build -t countersign:latest .` at the repository's root tags.
const DefaultImage = "countersign:latest"

// Options choose the variant of the Kubernetes base.
type Options struct {
	// Fleet keeps the state in PostgreSQL (--store-file) with the signing
	// keys sealed by a shared key file (--key-file), in several replicas.
	// Without it one replica keeps its state in bbolt on a
	// PersistentVolumeClaim.
	Fleet bool
	// Image is countersign's image reference; empty means DefaultImage.
	Image string
}

// File is one file of a kustomize base: its name in the directory and its
// contents.
type File struct {
	Name string
	Data []byte
}

// Validate reports every problem of o at once.
func (o Options) Validate() error {
	var errs []error
	if strings.IndexFunc(o.Image, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		errs = append(errs, fmt.Errorf("image reference %q holds white space or a control character: give an image reference such as registry.example.com/countersign:v1.2.3", o.Image))
	}
	return errors.Join(errs...)
}

//go:embed kubernetes/*.yaml
var kubernetesFS embed.FS

// templates are parsed once; a parse error is a bug of this package, which
// its tests catch.
var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"quote": quote,
}).ParseFS(kubernetesFS, "kubernetes/*.yaml"))

// kustomization is the first file of a base: the others are its resources.
const kustomization = "kustomization.yaml"

// Kubernetes renders the kustomize base o asks for: kustomization.yaml
// first, then its resources in the order it lists them.
func Kubernetes(o Options) ([]File, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Image == "" {
		o.Image = DefaultImage
	}
	names := []string{kustomization, "configmap.yaml", "secret.yaml", "deployment.yaml", "service.yaml"}
	if !o.Fleet {
		names = append(names, "pvc.yaml")
	}
	data := struct {
		Options
		Resources []string
	}{o, names[1:]}
	files := make([]File, 0, len(names))
	for _, name := range names {
		var b bytes.Buffer
		if err := templates.ExecuteTemplate(&b, name, data); err != nil {
			return nil, fmt.Errorf("render %s: %w", name, err)
		}
		files = append(files, File{Name: name, Data: b.Bytes()})
	}
	return files, nil
}

// WriteDir writes files into dir, creating it if need be. It refuses,
// naming them all, when any of the files exists, before writing any.
func WriteDir(dir string, files []File) error {
	var existing []string
	for _, f := range files {
		if _, err := os.Lstat(filepath.Join(dir, f.Name)); err == nil {
			existing = append(existing, f.Name)
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("manifests: %w", err)
		}
	}
	if len(existing) > 0 {
		return fmt.Errorf("%w in %s: %s; move them away or choose another directory", ErrExists, dir, strings.Join(existing, ", "))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("manifests: %w", err)
	}
	for _, f := range files {
		if err := writeNew(filepath.Join(dir, f.Name), f.Data); err != nil {
			return err
		}
	}
	return nil
}

// writeNew creates path (O_EXCL: a file that appeared since WriteDir
// looked is still not overwritten) and writes data into it.
func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%w: %s", ErrExists, path)
		}
		return fmt.Errorf("manifests: %w", err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("manifests: write %s: %w", path, err)
	}
	return nil
}

// WriteStream writes the resources of files to w as one multi-document
// YAML stream, which `kubectl apply -f -` takes. kustomization.yaml is not
// a Kubernetes object: only its leading comment, the list of values to
// fill in, comes first.
func WriteStream(w io.Writer, files []File) error {
	var b bytes.Buffer
	for _, f := range files {
		if f.Name != kustomization {
			continue
		}
		for _, line := range strings.SplitAfter(string(f.Data), "\n") {
			if !strings.HasPrefix(line, "#") {
				break
			}
			b.WriteString(line)
		}
	}
	for _, f := range files {
		if f.Name == kustomization {
			continue
		}
		fmt.Fprintf(&b, "---\n# %s\n", f.Name)
		b.Write(f.Data)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// quote writes s as a YAML double-quoted scalar (JSON's string syntax is
// YAML's), so no value can change the document's structure.
func quote(s string) (string, error) {
	b, err := json.Marshal(s)
	return string(b), err
}
