package main

import "github.com/spf13/cobra"

// newBundleCmd is a placeholder until its issue lands.
func newBundleCmd() *cobra.Command {
	return &cobra.Command{Use: "bundle", Hidden: true}
}
