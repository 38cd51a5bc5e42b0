package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"

	"github.com/countersign/countersign/sidecar/client"
)

// remoteFlags are the flags of a command that asks a running sidecar
// instead of reading a stopped one's files.
type remoteFlags struct {
	sidecar, tokenFile string
}

func (f *remoteFlags) add(fs *pflag.FlagSet, whose string) {
	fs.StringVar(&f.sidecar, "sidecar", "", "ask the running sidecar at this base URL (e.g. http://127.0.0.1:8080), with --token-file")
	fs.StringVar(&f.tokenFile, "token-file", "", "with --sidecar: a file holding "+whose+" bearer token (a JWT)")
}

func (f remoteFlags) set() bool { return f.sidecar != "" || f.tokenFile != "" }

// client reads the token and makes the sidecar's client.
func (f remoteFlags) client() (*client.Client, error) {
	if f.sidecar == "" || f.tokenFile == "" {
		return nil, errors.New("--sidecar URL and --token-file F go together: the sidecar to ask, and the token to ask it with")
	}
	return clientWithTokenFile(f.sidecar, f.tokenFile)
}

// clientWithTokenFile is the client of the sidecar at base, asking with
// the one bearer token tokenFile holds.
func clientWithTokenFile(base, tokenFile string) (*client.Client, error) {
	token, err := readTokenFile(tokenFile)
	if err != nil {
		return nil, err
	}
	c, err := client.New(base, token)
	if err != nil {
		return nil, fmt.Errorf("--sidecar: %w", err)
	}
	return c, nil
}

// writeExport runs export into -o FILE, or standard output when out is
// "". A file that export could not finish is removed: no half an export
// under the name asked for. It returns export's count.
func writeExport(stdout, stderr io.Writer, out, what string, export func(w io.Writer) (int, error)) error {
	if out == "" {
		_, err := export(stdout)
		return err
	}
	file, err := os.Create(out)
	if err != nil {
		return err
	}
	n, err := export(file)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out)
		return err
	}
	_, err = fmt.Fprintf(stderr, "wrote %d %s to %s\n", n, what, out)
	return err
}
