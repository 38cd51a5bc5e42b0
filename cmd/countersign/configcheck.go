package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/cmd/config"
)

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Check serve's configuration",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newConfigCheckCmd())
	return cmd
}

func newConfigCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check FILE",
		Short: "List every problem serve would have with the config file FILE, exit 1 when there is any",
		Long: `Check the YAML file FILE as serve --config FILE would read it, together
with the COUNTERSIGN_* environment variables that serve would also read
(a variable wins over the file), and print every problem at once, one a
line: unknown keys, values of the wrong type, production settings that are
missing, production settings given with dev: true, and files named that
cannot be read (the key files, the secret files, --store-file, the JWKS
file, the bundle). Exit 1 when there is any, 0 with a one-line summary
otherwise. It starts nothing and connects to nothing, and it never prints
a value: a value may be a secret.

The file's keys are serve's flag names, without --:

  data: /data
  agent: support-agent
  ledger: https://ledger.internal
  orders: https://orders.internal
  issuer: https://idp.example.com
  issuer-jwks: /etc/countersign/jwks.json
  store-file: /run/secrets/countersign-store
  mcp-allowed-origins: [https://agent.example.com]`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return checkConfig(cmd, args[0], os.LookupEnv)
		},
	}
}

// checkConfig prints every problem serve would have with file and the
// environment, or a summary of what they set.
func checkConfig(cmd *cobra.Command, file string, lookupEnv func(string) (string, bool)) error {
	var f serveFlags
	fs := newServeCmdFor(&f).Flags()
	if err := fs.Set("config", file); err != nil {
		return err
	}
	settings, _, err := f.settle(fs, lookupEnv)
	out := cmd.OutOrStdout()
	if se, ok := err.(*settingsError); ok {
		for _, p := range se.problems {
			fmt.Fprintln(out, p)
		}
		return &exitError{code: 1, err: fmt.Errorf("%s: %d %s", file, len(se.problems), plural(len(se.problems), "problem", "problems"))}
	}
	if err != nil {
		return err
	}
	mode := "production serve"
	if f.dev {
		mode = "serve --dev"
	}
	fromFile := settings.Keys(config.FromFile)
	line := fmt.Sprintf("ok: %s: %s, %d %s from the file", file, mode, len(fromFile), plural(len(fromFile), "setting", "settings"))
	if len(fromFile) > 0 {
		line += " (" + strings.Join(fromFile, ", ") + ")"
	}
	if env := settings.Keys(config.FromEnv); len(env) > 0 {
		names := make([]string, len(env))
		for i, k := range env {
			names[i] = config.EnvName(k)
		}
		line += fmt.Sprintf(", %d from the environment (%s)", len(env), strings.Join(names, ", "))
	}
	_, err = fmt.Fprintln(out, line)
	return err
}
