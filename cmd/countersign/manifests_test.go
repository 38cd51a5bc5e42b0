package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/countersign/countersign/cmd/manifests"
)

// kubeObjects are a rendered base's objects, each decoded strictly into
// its Kubernetes API type.
type kubeObjects struct {
	Deployment *appsv1.Deployment
	ConfigMap  *corev1.ConfigMap
	Secret     *corev1.Secret
	Service    *corev1.Service
	PVC        *corev1.PersistentVolumeClaim
}

// add decodes one object's JSON into the field of its kind, refusing any
// field the API type does not have and any kind or second object of a
// kind the base should not hold.
func (o *kubeObjects) add(j []byte) error {
	var meta struct{ Kind string }
	if err := json.Unmarshal(j, &meta); err != nil {
		return err
	}
	var dst any
	switch meta.Kind {
	case "Deployment":
		dst = &o.Deployment
	case "ConfigMap":
		dst = &o.ConfigMap
	case "Secret":
		dst = &o.Secret
	case "Service":
		dst = &o.Service
	case "PersistentVolumeClaim":
		dst = &o.PVC
	default:
		return fmt.Errorf("unexpected kind %q", meta.Kind)
	}
	if !reflect.ValueOf(dst).Elem().IsNil() {
		return fmt.Errorf("a second %s", meta.Kind)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return fmt.Errorf("%s: %w", meta.Kind, err)
	}
	return nil
}

// kustomizeBuild renders the base at dir in fs as kubectl apply -k does.
func kustomizeBuild(t *testing.T, fs filesys.FileSystem, dir string) kubeObjects {
	t.Helper()
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var o kubeObjects
	for _, r := range resMap.Resources() {
		j, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if err := o.add(j); err != nil {
			t.Fatalf("kustomize build %s: %v", dir, err)
		}
	}
	return o
}

// decodeStream decodes the documents of a multi-document YAML stream.
func decodeStream(t *testing.T, stream string) kubeObjects {
	t.Helper()
	var o kubeObjects
	for doc := range strings.SplitSeq(stream, "\n---\n") {
		j, err := yaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			t.Fatalf("stream: %v\n%s", err, doc)
		}
		if string(j) == "null" { // comments only
			continue
		}
		if err := o.add(j); err != nil {
			t.Fatalf("stream: %v", err)
		}
	}
	return o
}

func TestManifestsKubernetes(t *testing.T) {
	for _, variant := range []struct {
		name string
		args []string
		o    manifests.Options
	}{
		{"one sidecar keeps its state in bbolt on a claimed volume", nil, manifests.Options{}},
		{"a fleet shares a PostgreSQL store and a key file", []string{"--fleet"}, manifests.Options{Fleet: true}},
	} {
		t.Run(variant.name, func(t *testing.T) {
			files, err := manifests.Kubernetes(variant.o)
			if err != nil {
				t.Fatal(err)
			}
			mem := filesys.MakeFsInMemory()
			for _, f := range files {
				if err := mem.WriteFile("/base/"+f.Name, f.Data); err != nil {
					t.Fatal(err)
				}
			}
			objs := kustomizeBuild(t, mem, "/base")

			dir := filepath.Join(t.TempDir(), "base")
			if out, err := runRoot(t, append([]string{"manifests", "kubernetes", "-o", dir}, variant.args...)...); err != nil {
				t.Fatalf("manifests kubernetes -o: %v\n%s", err, out)
			}
			if onDisk := kustomizeBuild(t, filesys.MakeFsOnDisk(), dir); !reflect.DeepEqual(onDisk, objs) {
				t.Error("the base written with -o renders other objects than the package's files")
			}
			stream, err := runRoot(t, append([]string{"manifests", "kubernetes"}, variant.args...)...)
			if err != nil {
				t.Fatalf("manifests kubernetes: %v\n%s", err, stream)
			}
			if got := decodeStream(t, stream); !reflect.DeepEqual(got, objs) {
				t.Error("the stream on stdout holds other objects than kustomize renders from the base")
			}
			kustomization, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			header := leadingComment(string(kustomization))
			if !strings.HasPrefix(stream, header) {
				t.Error("the stream does not start with kustomization.yaml's list of values to fill in")
			}

			checkSidecar(t, objs, manifests.DefaultImage)
			checkServeFlags(t, objs, stream)
			checkPlaceholders(t, objs, header)
			checkVariant(t, objs, variant.o.Fleet)
		})
	}
}

// leadingComment is the comment lines a YAML file starts with.
func leadingComment(s string) string {
	var b strings.Builder
	for line := range strings.SplitAfterSeq(s, "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

// countersignContainer is the pod's countersign container: its only init
// container.
func countersignContainer(t *testing.T, o kubeObjects) corev1.Container {
	t.Helper()
	if o.Deployment == nil {
		t.Fatal("no Deployment")
	}
	spec := o.Deployment.Spec.Template.Spec
	if len(spec.InitContainers) != 1 || spec.InitContainers[0].Name != "countersign" {
		var names []string
		for _, c := range spec.InitContainers {
			names = append(names, c.Name)
		}
		t.Fatalf("init containers %q, want one named countersign", names)
	}
	return spec.InitContainers[0]
}

// serveArgs are the container's serve flags, name to value.
func serveArgs(t *testing.T, c corev1.Container) map[string]string {
	t.Helper()
	if len(c.Command) != 0 || len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("command %q args %q: want the image's entrypoint with args serve ...", c.Command, c.Args)
	}
	flags := map[string]string{}
	for _, a := range c.Args[1:] {
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok || !strings.HasPrefix(a, "--") {
			t.Fatalf("arg %q: want --flag=value", a)
		}
		flags[name] = value
	}
	return flags
}

func checkSidecar(t *testing.T, o kubeObjects, image string) {
	t.Helper()
	c := countersignContainer(t, o)
	pod := o.Deployment.Spec.Template.Spec
	if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("countersign's restartPolicy %v, want Always: a native sidecar", c.RestartPolicy)
	}
	if c.Image != image {
		t.Errorf("countersign's image %q, want %q", c.Image, image)
	}

	args := serveArgs(t, c)
	host, port, ok := strings.Cut(args["listen"], ":")
	if !ok || host != "0.0.0.0" {
		t.Errorf("--listen=%q, want 0.0.0.0:PORT: the kubelet's probes come to the pod's IP", args["listen"])
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{
		{"startup", c.StartupProbe, "/healthz"},
		{"readiness", c.ReadinessProbe, "/readyz"},
		{"liveness", c.LivenessProbe, "/healthz"},
	} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("no %s probe by HTTP GET", p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path {
			t.Errorf("%s probe GET %s, want %s", p.name, p.probe.HTTPGet.Path, p.path)
		}
		if got := containerPort(t, c, p.probe.HTTPGet.Port.String()); strconv.Itoa(int(got)) != port {
			t.Errorf("%s probe on port %d, countersign listens on %s", p.name, got, port)
		}
	}
	var agentURL string
	for _, ac := range pod.Containers {
		for _, e := range ac.Env {
			if e.Name == "SIDECAR_URL" {
				agentURL = e.Value
			}
		}
	}
	if want := "http://127.0.0.1:" + port; agentURL != want {
		t.Errorf("the agent's SIDECAR_URL %q, want %q", agentURL, want)
	}
	if o.Service == nil || len(o.Service.Spec.Ports) != 1 ||
		containerPort(t, c, o.Service.Spec.Ports[0].TargetPort.String()) == 0 ||
		!reflect.DeepEqual(o.Service.Spec.Selector, o.Deployment.Spec.Selector.MatchLabels) {
		t.Error("the Service does not reach countersign's port in the agent's pods")
	}

	sc := c.SecurityContext
	if sc == nil || pod.SecurityContext == nil {
		t.Fatal("no security context")
	}
	for _, f := range []struct {
		what string
		ok   bool
	}{
		{"runAsNonRoot", sc.RunAsNonRoot != nil && *sc.RunAsNonRoot && pod.SecurityContext.RunAsNonRoot != nil && *pod.SecurityContext.RunAsNonRoot},
		{"runAsUser 65532", sc.RunAsUser != nil && *sc.RunAsUser == 65532},
		{"readOnlyRootFilesystem", sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem},
		{"allowPrivilegeEscalation false", sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation},
		{"capabilities drop ALL", sc.Capabilities != nil && slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) && len(sc.Capabilities.Add) == 0},
		{"seccompProfile RuntimeDefault", sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault},
		{"fsGroup 65532, so the volumes are the user's", pod.SecurityContext.FSGroup != nil && *pod.SecurityContext.FSGroup == 65532},
		{"privileged unset", sc.Privileged == nil},
	} {
		if !f.ok {
			t.Errorf("countersign's security context lacks %s", f.what)
		}
	}

	if o.ConfigMap == nil || len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef == nil || c.EnvFrom[0].ConfigMapRef.Name != o.ConfigMap.Name {
		t.Errorf("countersign does not take its environment from the ConfigMap: %+v", c.EnvFrom)
	}
	if len(c.Env) != 0 {
		t.Errorf("countersign's env %v: its settings belong in the ConfigMap, its secrets in files", c.Env)
	}
	if mountedVolume(t, pod, c, args["data"]) == nil {
		t.Errorf("--data=%s is not a mounted volume: the root filesystem is read-only", args["data"])
	}
	secrets := 0
	for name, value := range args {
		dir, key := filepath.Split(value)
		if !strings.HasPrefix(value, "/secrets/") {
			continue
		}
		secrets++
		v := mountedVolume(t, pod, c, filepath.Clean(dir))
		switch {
		case v == nil || v.Secret == nil || o.Secret == nil || v.Secret.SecretName != o.Secret.Name:
			t.Errorf("--%s=%s: %s is not the Secret's volume", name, value, dir)
		case v.Secret.DefaultMode == nil || *v.Secret.DefaultMode != 0o440:
			t.Errorf("the Secret's files have mode %s (decimal), want 0440 (288, readable through fsGroup)", deref(v.Secret.DefaultMode))
		case o.Secret.StringData[key] == "":
			t.Errorf("--%s=%s: the Secret has no key %s", name, value, key)
		}
	}
	if secrets == 0 {
		t.Error("no serve flag reads a file of the Secret")
	}
}

// containerPort resolves a probe's or a Service's port, a name or a
// number, to one of c's container ports (0 if none).
func containerPort(t *testing.T, c corev1.Container, port string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == port || strconv.Itoa(int(p.ContainerPort)) == port {
			return p.ContainerPort
		}
	}
	return 0
}

// mountedVolume is the pod's volume that c mounts at path, or nil.
func mountedVolume(t *testing.T, pod corev1.PodSpec, c corev1.Container, path string) *corev1.Volume {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.MountPath != path {
			continue
		}
		for i, v := range pod.Volumes {
			if v.Name == m.Name {
				return &pod.Volumes[i]
			}
		}
	}
	return nil
}

// countersignEnv matches the variables of the COUNTERSIGN_<FLAG> convention
// anywhere in the output, comments included.
var countersignEnv = regexp.MustCompile(`COUNTERSIGN_[A-Z0-9_]+`)

// checkServeFlags holds every arg and every COUNTERSIGN_ variable the base
// names to a flag of serve, no flag given twice, and the production flags
// serve requires all given.
func checkServeFlags(t *testing.T, o kubeObjects, text string) {
	t.Helper()
	serve := newServeCmd().Flags()
	known := func(what, name string) {
		t.Helper()
		if serve.Lookup(name) == nil {
			t.Errorf("%s: serve has no flag --%s", what, name)
		}
	}
	given := map[string]bool{}
	for name := range serveArgs(t, countersignContainer(t, o)) {
		known("arg --"+name, name)
		given[name] = true
	}
	for key := range o.ConfigMap.Data {
		if !countersignEnv.MatchString(key) {
			t.Errorf("ConfigMap key %s is not COUNTERSIGN_<FLAG>", key)
			continue
		}
		name := flagOfEnv(key)
		known("ConfigMap key "+key, name)
		if given[name] {
			t.Errorf("--%s is given both as an arg and as %s", name, key)
		}
		given[name] = true
	}
	for _, v := range countersignEnv.FindAllString(text, -1) {
		known(v, flagOfEnv(v))
	}
	for _, name := range []string{"agent", "ledger", "orders", "issuer", "issuer-jwks", "data", "listen", "bundle-verification-key"} {
		if !given[name] {
			t.Errorf("--%s is given neither as an arg nor in the ConfigMap", name)
		}
	}
}

// deref prints a pointer's value in a failure message.
func deref[T any](p *T) string {
	if p == nil {
		return "<unset>"
	}
	return fmt.Sprint(*p)
}

func flagOfEnv(v string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(v, "COUNTERSIGN_")), "_", "-")
}

// checkPlaceholders holds every value left to fill in to the list at the
// top of kustomization.yaml, and countersign's own image to none.
func checkPlaceholders(t *testing.T, o kubeObjects, header string) {
	t.Helper()
	listed := func(file, name string) bool {
		return regexp.MustCompile(`(?m)^#\s+` + regexp.QuoteMeta(file) + `\s+` + regexp.QuoteMeta(name) + `\s`).MatchString(header)
	}
	toFill := 0
	for key, v := range o.ConfigMap.Data {
		if strings.Contains(v, manifests.Placeholder) {
			toFill++
			if !listed("configmap.yaml", key) {
				t.Errorf("ConfigMap %s=%s is to fill in but not listed at the top", key, v)
			}
		}
	}
	for key, v := range o.Secret.StringData {
		if strings.Contains(v, manifests.Placeholder) {
			toFill++
			if !listed("secret.yaml", key) {
				t.Errorf("Secret key %s is to fill in but not listed at the top", key)
			}
		}
	}
	pod := o.Deployment.Spec.Template.Spec
	for _, c := range append(pod.Containers, pod.InitContainers...) {
		if strings.Contains(c.Image, manifests.Placeholder) && !listed("deployment.yaml", c.Name) {
			t.Errorf("container %s's image %s is to fill in but not listed at the top", c.Name, c.Image)
		}
		for _, e := range c.Env {
			if strings.Contains(e.Value, manifests.Placeholder) {
				t.Errorf("container %s's %s is a placeholder in deployment.yaml: it belongs in the ConfigMap", c.Name, e.Name)
			}
		}
	}
	if strings.Contains(countersignContainer(t, o).Image, manifests.Placeholder) {
		t.Error("countersign's own image is a placeholder")
	}
	if n := strings.Count(header, "\n#   "); n != toFill+1 {
		t.Errorf("the top lists %d values, the base has %d to fill in and the agent's image", n, toFill)
	}
}

func checkVariant(t *testing.T, o kubeObjects, fleet bool) {
	t.Helper()
	d := o.Deployment
	args := serveArgs(t, countersignContainer(t, o))
	data := mountedVolume(t, d.Spec.Template.Spec, countersignContainer(t, o), args["data"])
	if data == nil {
		t.Fatal("--data is not a mounted volume")
	}
	if fleet {
		if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
			t.Errorf("a fleet of %s replicas, want several", deref(d.Spec.Replicas))
		}
		if args["store-file"] == "" || args["key-file"] == "" || args["store"] != "" {
			t.Errorf("a fleet's args %v: want --store-file and --key-file, files of the Secret (the URL never in the environment)", args)
		}
		if data.EmptyDir == nil || o.PVC != nil {
			t.Error("a fleet's /data should be an emptyDir without a claim: its state is in PostgreSQL")
		}
		return
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("one sidecar on bbolt with %s replicas and strategy %q, want 1 and Recreate: its file has one writer", deref(d.Spec.Replicas), d.Spec.Strategy.Type)
	}
	if args["store-file"] != "" || args["key-file"] != "" {
		t.Errorf("one sidecar's args %v name a shared store", args)
	}
	if o.PVC == nil || data.PersistentVolumeClaim == nil || data.PersistentVolumeClaim.ClaimName != o.PVC.Name {
		t.Error("one sidecar's /data should be the base's PersistentVolumeClaim: bbolt's file must outlive the pod")
	}
}

func TestManifestsKubernetesImage(t *testing.T) {
	for _, c := range []struct{ name, image string }{
		{"a tag", "registry.example.com/countersign:v1.2.3"},
		{"a digest", "registry.example.com/countersign@sha256:" + strings.Repeat("0f", 32)},
		{"a reference YAML would read as an alias stays a string", "*countersign"},
		{"a reference YAML would read as a list stays a string", "[countersign]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := runRoot(t, "manifests", "kubernetes", "--image", c.image)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			checkSidecar(t, decodeStream(t, out), c.image)
		})
	}
	for _, image := range []string{"countersign:v1\n  command: [sh]", "countersign v1", "countersign:v1\x00"} {
		if out, err := runRoot(t, "manifests", "kubernetes", "--image", image); err == nil || !strings.Contains(err.Error(), "white space or a control character") {
			t.Errorf("image %q: err %v, out\n%s", image, err, out)
		}
	}
}

func TestManifestsKubernetesKeepsAnEditedBase(t *testing.T) {
	dir := t.TempDir()
	if out, err := runRoot(t, "manifests", "kubernetes", "-o", dir); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	edited := filepath.Join(dir, "configmap.yaml")
	if err := os.WriteFile(edited, []byte("edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := runRoot(t, "manifests", "kubernetes", "--fleet", "-o", dir)
	if !errors.Is(err, manifests.ErrExists) || !strings.Contains(err.Error(), "configmap.yaml") {
		t.Errorf("a second run into the same directory: %v, want ErrExists naming the files", err)
	}
	if b, _ := os.ReadFile(edited); string(b) != "edited\n" {
		t.Errorf("the edited file was overwritten: %q", b)
	}
}
