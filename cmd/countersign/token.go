package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/executor/fixture"
	"github.com/countersign/countersign/executor/sim/idp"
	"github.com/spf13/cobra"
)

// newTokenCmd prints a dev bearer token for one fixture person, signed by
// the dev issuer key under --data (the same key `serve --dev` trusts).
func newTokenCmd() *cobra.Command {
	var (
		sub  string
		data string
		ttl  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "token --sub PERSON --data DIR",
		Short: "Print a dev bearer token for a fixture person",
		Long: `Print a bearer token for one of the Quillfeather fixture people, signed by
the dev identity provider's key under DIR/idp (created if absent). A sidecar
started with serve --dev --data DIR trusts it.

For development only: the dev issuer signs for anyone, with no login.`,
		Example: `  countersign token --sub rep-ana --data ./data
  curl -H "Authorization: Bearer $(countersign token --sub lead-dee --data ./data)" ...`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			person, ok := fixture.PersonByID(sub)
			if !ok {
				return fmt.Errorf("unknown person %q: --sub must be one of %s", sub, strings.Join(personIDs(), ", "))
			}
			if ttl < time.Second {
				return fmt.Errorf("--ttl %s is too short: give at least 1s (default %s)", ttl, idp.DevTokenTTL)
			}
			iss, err := idp.Open(idp.Options{Dir: data})
			if err != nil {
				return err
			}
			tok, err := iss.Sign(person, ttl)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), tok)
			return err
		},
	}
	cmd.Flags().StringVar(&sub, "sub", "", "fixture person to sign for: "+strings.Join(personIDs(), ", "))
	cmd.Flags().StringVar(&data, "data", "", "data directory holding the dev issuer key (DIR/idp/key.json)")
	cmd.Flags().DurationVar(&ttl, "ttl", idp.DevTokenTTL, "lifetime of the token")
	_ = cmd.MarkFlagRequired("sub")
	_ = cmd.MarkFlagRequired("data")
	return cmd
}

func personIDs() []string {
	var ids []string
	for _, p := range fixture.People() {
		ids = append(ids, p.ID)
	}
	return ids
}
