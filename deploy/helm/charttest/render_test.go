package charttest

import (
	"bufio"
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli/values"
	"helm.sh/helm/v3/pkg/getter"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

// chartDir is the chart under test.
const chartDir = "../sundial"

// namespace and release of every rendering.
const (
	namespace = "scheduling"
	release   = "sundial"
)

// object is one rendered object, decoded into its Go type.
type object struct {
	source string // template file
	hook   bool
	obj    runtime.Object
	name   string
	kind   string
}

// render renders the chart as `helm template` would with the given values
// files (relative to the chart) and --set values, and returns every object,
// hooks included, strictly decoded.
func render(t *testing.T, files []string, set ...string) []object {
	t.Helper()
	objs, err := renderErr(files, set...)
	require.NoError(t, err)
	return objs
}

func renderErr(files []string, set ...string) ([]object, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	opts := values.Options{Values: set}
	for _, f := range files {
		opts.ValueFiles = append(opts.ValueFiles, filepath.Join(chartDir, f))
	}
	vals, err := opts.MergeValues(getter.Providers{})
	if err != nil {
		return nil, err
	}
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = release, namespace
	rel, err := install.Run(ch, vals)
	if err != nil {
		return nil, err
	}
	dec, err := newStrictDecoder()
	if err != nil {
		return nil, err
	}
	var objs []object
	add := func(manifest string, hook bool) error {
		for _, doc := range splitManifest(manifest) {
			o, err := dec.decode(doc.body)
			if err != nil {
				return fmt.Errorf("%s: %w\n%s", doc.source, err, doc.body)
			}
			o.source, o.hook = doc.source, hook
			objs = append(objs, o)
		}
		return nil
	}
	if err := add(rel.Manifest, false); err != nil {
		return nil, err
	}
	for _, h := range rel.Hooks {
		if err := add("# Source: "+h.Path+"\n"+h.Manifest, true); err != nil {
			return nil, err
		}
	}
	return objs, nil
}

type document struct {
	source string
	body   []byte
}

// splitManifest splits a rendered manifest into its YAML documents, each with
// the template it came from ("# Source:" comments).
func splitManifest(manifest string) []document {
	var docs []document
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for {
		b, err := r.Read()
		if err != nil {
			break
		}
		source := ""
		for _, l := range strings.Split(string(b), "\n") {
			if s, ok := strings.CutPrefix(l, "# Source: "); ok {
				source = s
			}
		}
		if len(bytes.TrimSpace(stripComments(b))) == 0 {
			continue
		}
		docs = append(docs, document{source: source, body: b})
	}
	return docs
}

func stripComments(b []byte) []byte {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return []byte(strings.Join(out, "\n"))
}

// strictDecoder decodes YAML into the built-in Kubernetes types and the
// Prometheus Operator's; an unknown kind, an unknown field or a duplicate
// field is an error.
type strictDecoder struct {
	ser *json.Serializer
}

func newStrictDecoder() (strictDecoder, error) {
	s := runtime.NewScheme()
	if err := scheme.AddToScheme(s); err != nil {
		return strictDecoder{}, err
	}
	if err := monitoringv1.AddToScheme(s); err != nil {
		return strictDecoder{}, err
	}
	return strictDecoder{ser: json.NewSerializerWithOptions(json.DefaultMetaFactory, s, s, json.SerializerOptions{Yaml: true, Strict: true})}, nil
}

func (d strictDecoder) decode(doc []byte) (object, error) {
	obj, gvk, err := d.ser.Decode(doc, nil, nil)
	if err != nil {
		return object{}, err
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return object{}, err
	}
	return object{obj: obj, name: acc.GetName(), kind: gvk.Kind}, nil
}

func kinds(objs []object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.kind+"/"+o.name)
	}
	sort.Strings(out)
	return out
}
