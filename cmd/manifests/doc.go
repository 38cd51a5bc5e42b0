// Package manifests renders what an operator needs to run countersign on a
// platform, from the binary itself, as istioctl and linkerd generate
// theirs: the repository's top level holds no deployment files.
//
// # Kubernetes
//
// [Kubernetes] renders a kustomize base: kustomization.yaml and one file
// per resource. The agent's pod runs countersign as a native sidecar (an
// init container with restartPolicy: Always, Kubernetes 1.29 or later),
// so it starts before the agent, whose container waits for its startup
// probe, and stops after it. The agent reaches it on 127.0.0.1:8080.
//
// Where each setting lives, and why:
//
//	deployment.yaml  --listen, --data and the secrets' paths, as args: they
//	                 must agree with the ports, probes and mounts beside them
//	configmap.yaml   what differs between installations (the agent's id, the
//	                 systems of record, the issuer), as COUNTERSIGN_<FLAG>
//	                 variables through envFrom
//	secret.yaml      the bundle verification key and, for a fleet, the
//	                 PostgreSQL URL (--store-file) and the key-encryption key
//	                 (--key-file), mounted read-only as files under /secrets:
//	                 never in the environment, which child processes inherit
//	service.yaml     the systems of record fetch /.well-known/jwks.json and
//	                 leads open the approvals page through it
//	pvc.yaml         without --fleet only: bbolt's file under /data outlives
//	                 the pod
//
// countersign listens on 0.0.0.0:8080, not loopback: the kubelet's probes
// come to the pod's IP. The root filesystem is read-only, so /data is a
// volume: a PersistentVolumeClaim for one sidecar on bbolt (one replica,
// Recreate, as bbolt's file has one writer), an emptyDir for a fleet, whose
// state is in PostgreSQL and whose /data holds only the PID file.
//
// Every value an operator must fill in contains [Placeholder], and the
// comment at the top of kustomization.yaml lists them all.
package manifests
