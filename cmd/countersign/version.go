package main

import (
	"fmt"

	"github.com/countersign/countersign/executor/buildinfo"
	"github.com/spf13/cobra"
)

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the build: module version, VCS revision, Go and OPA versions",
		Long: `Print which build this binary is: the same facts /readyz answers and the
countersign_build_info metric carries. A field the build did not record
(a build with -buildvcs=false has no revision) reads "unknown".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := buildinfo.Read()
			if asJSON {
				return printJSON(cmd.OutOrStdout(), b)
			}
			revision := b.Revision
			if b.Modified {
				revision += " (modified)"
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "countersign %s\nrevision    %s\ngo          %s\nopa         %s\n",
				b.Version, revision, b.GoVersion, b.OPAVersion)
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the build as JSON")
	return cmd
}
