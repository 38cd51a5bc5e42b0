package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/countersign/countersign/cmd/manifests"
)

func newManifestsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "manifests",
		Short: "Write the files that deploy countersign on a platform",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newManifestsKubernetesCmd())
	return cmd
}

func newManifestsKubernetesCmd() *cobra.Command {
	var (
		o   manifests.Options
		dir string
	)
	cmd := &cobra.Command{
		Use:   "kubernetes [--fleet] [--image I] [-o DIR]",
		Short: "Write a kustomize base: an agent's pod with countersign as its native sidecar",
		Long: `Write a kustomize base that runs countersign beside an agent: a Deployment
whose pod holds countersign as a native sidecar (an init container with
restartPolicy: Always, Kubernetes 1.29 or later) and the agent, which
reaches it on 127.0.0.1:8080; its settings in a ConfigMap, its secrets in a
Secret mounted as files; a non-root user, a read-only root filesystem and
/data on a volume; a Service for the systems of record and the leads.

Without --fleet one replica keeps its state in bbolt on a
PersistentVolumeClaim. With --fleet several replicas share a PostgreSQL
store (its URL in the Secret, read with --store-file) and the fleet's key
file (--key-file).

With -o DIR the base is written into DIR (kustomization.yaml and one file
per resource; an existing file is never overwritten); without it the
resources go to stdout as one YAML stream. Every value to fill in holds
REPLACE-ME, and the comment at the top lists them.`,
		Example: `  countersign manifests kubernetes -o base/
  kubectl apply -k base/
  countersign manifests kubernetes --fleet --image registry.example.com/countersign:v1.2.3 -o fleet/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			files, err := manifests.Kubernetes(o)
			if err != nil {
				return err
			}
			if dir == "" {
				return manifests.WriteStream(cmd.OutOrStdout(), files)
			}
			if err := manifests.WriteDir(dir, files); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "wrote the base to %s: fill in every REPLACE-ME, then kubectl apply -k %s\n", dir, dir)
			return err
		},
	}
	cmd.Flags().BoolVar(&o.Fleet, "fleet", false, "several replicas on a shared PostgreSQL store, with the fleet's key file (default: one replica on bbolt)")
	cmd.Flags().StringVar(&o.Image, "image", manifests.DefaultImage, "countersign's image reference (the default is what docker build -t countersign:latest . tags)")
	cmd.Flags().StringVarP(&dir, "output", "o", "", "write the base into this directory (default: the resources to stdout)")
	return cmd
}
