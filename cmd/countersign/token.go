package main

import "github.com/spf13/cobra"

// newTokenCmd is a placeholder until its issue lands.
func newTokenCmd() *cobra.Command {
	return &cobra.Command{Use: "token", Hidden: true}
}
