package main

import "github.com/spf13/cobra"

// newSimCmd is a placeholder until its issue lands.
func newSimCmd() *cobra.Command {
	return &cobra.Command{Use: "sim", Hidden: true}
}
