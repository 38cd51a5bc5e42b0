package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/cmd/config"
)

// defaultHealthAddr is where healthcheck asks when neither --addr nor
// COUNTERSIGN_LISTEN says: the container's listen address.
const defaultHealthAddr = "127.0.0.1:8080"

func newHealthcheckCmd() *cobra.Command {
	var (
		addr    string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "healthcheck [--addr HOST:PORT] [--timeout D]",
		Short: "Exit 0 when the sidecar at --addr is ready (/readyz answers 200), 1 otherwise",
		Long: `Ask the sidecar's /readyz and exit 0 when it answers 200, 1 otherwise,
printing one line that says why. This is what a container's HEALTHCHECK
runs: the image needs no shell and no curl.

--addr defaults to COUNTERSIGN_LISTEN when it is set, else to the listen:
of the file COUNTERSIGN_CONFIG names, else ` + defaultHealthAddr + `.
A listen address on every interface (0.0.0.0:PORT, [::]:PORT or :PORT) is
asked on 127.0.0.1:PORT.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("addr") && os.Getenv("COUNTERSIGN_LISTEN") == "" {
				if listen := listenFromConfig(os.LookupEnv); listen != "" {
					addr = listen
				}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			if err := checkReady(ctx, dialAddr(addr)); err != nil {
				return &exitError{code: 1, err: err}
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "ready")
			return err
		},
	}
	def := defaultHealthAddr
	if env := os.Getenv("COUNTERSIGN_LISTEN"); env != "" {
		def = env
	}
	cmd.Flags().StringVar(&addr, "addr", def, "the sidecar's address, HOST:PORT (default COUNTERSIGN_LISTEN if set)")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for the answer before calling the sidecar unhealthy")
	return cmd
}

// dialAddr turns a listen address into one to dial: a wildcard or empty
// host means this machine, asked on loopback.
func dialAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen // let the request say what is wrong with it
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// checkReady asks http://addr/readyz and returns nil on 200, else an
// error whose text is the one line healthcheck prints.
func checkReady(ctx context.Context, addr string) error {
	url := "http://" + addr + "/readyz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("unreachable: %w", err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("unreachable: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusOK {
		return nil
	}
	var answer struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if err == nil {
		err = json.Unmarshal(body, &answer)
	}
	if err != nil || answer.Error.Message == "" {
		return fmt.Errorf("not ready: %s answered %s", url, res.Status)
	}
	return errors.New("not ready: " + answer.Error.Message)
}

// listenFromConfig is serve's --listen as the config file named by
// COUNTERSIGN_CONFIG sets it, "" when it does not: the address a container
// configured by that file serves on.
func listenFromConfig(lookupEnv func(string) (string, bool)) string {
	fs := newServeCmd().Flags()
	settings, _ := config.Load(fs, "config", lookupEnv) // the file's problems are serve's to report
	if settings.Origins["listen"].Source != config.FromFile {
		return ""
	}
	return fs.Lookup("listen").Value.String()
}
