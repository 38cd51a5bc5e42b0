package manifests_test

import (
	"fmt"

	"github.com/countersign/countersign/cmd/manifests"
)

// A fleet's base has no PersistentVolumeClaim: its state is in PostgreSQL.
func ExampleKubernetes() {
	for _, fleet := range []bool{false, true} {
		files, err := manifests.Kubernetes(manifests.Options{Fleet: fleet})
		if err != nil {
			fmt.Println(err)
			return
		}
		var names []string
		for _, f := range files {
			names = append(names, f.Name)
		}
		fmt.Println(fleet, names)
	}
	// Output:
	// false [kustomization.yaml configmap.yaml secret.yaml deployment.yaml service.yaml pvc.yaml]
	// true [kustomization.yaml configmap.yaml secret.yaml deployment.yaml service.yaml]
}
