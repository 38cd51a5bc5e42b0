package main

import (
	"fmt"

	"github.com/countersign/countersign/executor/credential"
	"github.com/spf13/cobra"
)

// newKeyfileCmd creates the key-encryption key a fleet's sidecars share.
func newKeyfileCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keyfile -o FILE",
		Short: "Create a key-encryption key file for a fleet of sidecars (serve --key-file)",
		Long: `Create FILE (mode 0600) holding a fresh key-encryption key: 32 random
bytes in standard base64 on one line. Sidecars sharing a store
(PostgreSQL) keep the signing keys of actor tokens in it, sealed with this
key; give every sidecar of the fleet the same file (serve --key-file FILE)
and keep it out of the database's backups. An existing FILE is refused:
replacing a fleet's key would lose the signing keys sealed with it.`,
		Example: `  countersign keyfile -o /etc/countersign/fleet.key`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := credential.WriteKeyFile(out); err != nil {
				return err
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "wrote a key-encryption key to %s; give every sidecar of the fleet --key-file %s\n", out, out)
			return err
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "the file to create")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}
