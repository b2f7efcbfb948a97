package charttest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/cli/values"
	"helm.sh/helm/v3/pkg/getter"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// workload is a Deployment, StatefulSet or Job, reduced to what the checks
// read.
type workload struct {
	kind, name string
	selector   *metav1.LabelSelector // nil for a Job
	pod        corev1.PodTemplateSpec
	hook       bool
}

func workloads(objs []object) []workload {
	var out []workload
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *appsv1.Deployment:
			out = append(out, workload{"Deployment", v.Name, v.Spec.Selector, v.Spec.Template, o.hook})
		case *appsv1.StatefulSet:
			out = append(out, workload{"StatefulSet", v.Name, v.Spec.Selector, v.Spec.Template, o.hook})
		case *batchv1.Job:
			out = append(out, workload{"Job", v.Name, nil, v.Spec.Template, o.hook})
		}
	}
	return out
}

func configMaps(objs []object) map[string]*corev1.ConfigMap {
	out := map[string]*corev1.ConfigMap{}
	for _, o := range objs {
		if cm, ok := o.obj.(*corev1.ConfigMap); ok {
			out[cm.Name] = cm
		}
	}
	return out
}

// component returns the workload of a Sundial component.
func component(t *testing.T, objs []object, name string) workload {
	t.Helper()
	for _, w := range workloads(objs) {
		if w.pod.Labels["app.kubernetes.io/component"] == name {
			return w
		}
	}
	t.Fatalf("no workload of component %s in %v", name, kinds(objs))
	return workload{}
}

// configOf returns the parsed config file a workload's pod mounts.
func configOf(t *testing.T, objs []object, w workload) map[string]any {
	t.Helper()
	cms := configMaps(objs)
	for _, v := range w.pod.Spec.Volumes {
		if v.Name != "config" {
			continue
		}
		require.NotNil(t, v.ConfigMap, "%s: volume config", w.name)
		cm, ok := cms[v.ConfigMap.Name]
		require.True(t, ok, "%s: ConfigMap %s is not rendered", w.name, v.ConfigMap.Name)
		require.Len(t, v.ConfigMap.Items, 1)
		text, ok := cm.Data[v.ConfigMap.Items[0].Key]
		require.True(t, ok, "%s: ConfigMap %s has no key %s", w.name, cm.Name, v.ConfigMap.Items[0].Key)
		var c map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(text), &c), "%s: config file:\n%s", w.name, text)
		return c
	}
	t.Fatalf("%s mounts no config", w.name)
	return nil
}

func env(c corev1.Container) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		out[e.Name] = e
	}
	return out
}

// checkObjects checks what holds for every rendering: names and labels
// Kubernetes accepts, and the references between objects.
func checkObjects(t *testing.T, objs []object) {
	t.Helper()
	require.NotEmpty(t, objs)
	cms := configMaps(objs)
	seen := map[string]bool{}
	var podLabels []labels.Set
	for _, w := range workloads(objs) {
		podLabels = append(podLabels, labels.Set(w.pod.Labels))
	}
	for _, o := range objs {
		id := o.kind + "/" + o.name
		assert.False(t, seen[id], "%s is rendered twice", id)
		seen[id] = true
		for _, msg := range validation.IsDNS1123Subdomain(o.name) {
			t.Errorf("%s: name: %s", id, msg)
		}
		acc := o.obj.(metav1.Object)
		errs := metav1validation.ValidateLabels(acc.GetLabels(), field.NewPath(id, "metadata", "labels"))
		assert.Empty(t, errs.ToAggregate(), "%s", id)

		switch v := o.obj.(type) {
		case *corev1.Service:
			for _, msg := range validation.IsDNS1035Label(v.Name) {
				t.Errorf("%s: a Service name must be a DNS-1035 label: %s", id, msg)
			}
			assert.True(t, selectsAny(labels.SelectorFromSet(v.Spec.Selector), podLabels), "%s selects no pod", id)
		case *policyv1.PodDisruptionBudget:
			sel, err := metav1.LabelSelectorAsSelector(v.Spec.Selector)
			require.NoError(t, err)
			assert.True(t, selectsAny(sel, podLabels), "%s selects no pod", id)
		case *monitoringv1.ServiceMonitor:
			sel, err := metav1.LabelSelectorAsSelector(&v.Spec.Selector)
			require.NoError(t, err)
			var services []labels.Set
			for _, s := range objs {
				if svc, ok := s.obj.(*corev1.Service); ok {
					services = append(services, labels.Set(svc.Labels))
					assert.True(t, sel.Matches(labels.Set(svc.Labels)), "%s does not select %s", id, svc.Name)
					assert.Equal(t, "sundial", svc.Labels[v.Spec.JobLabel], "the dashboards and alerts select job=\"sundial\"")
				}
			}
			require.NotEmpty(t, services)
		}
	}

	for _, w := range workloads(objs) {
		id := w.kind + "/" + w.name
		if w.selector != nil {
			sel, err := metav1.LabelSelectorAsSelector(w.selector)
			require.NoError(t, err)
			assert.True(t, sel.Matches(labels.Set(w.pod.Labels)), "%s: the selector does not select its own pods", id)
		}
		spec := w.pod.Spec
		require.NotNil(t, spec.SecurityContext, id)
		require.NotNil(t, spec.SecurityContext.RunAsNonRoot, id)
		assert.True(t, *spec.SecurityContext.RunAsNonRoot, "%s runs as non-root", id)
		volumes := map[string]corev1.Volume{}
		for _, v := range spec.Volumes {
			volumes[v.Name] = v
			if v.ConfigMap != nil {
				cm, ok := cms[v.ConfigMap.Name]
				if assert.True(t, ok, "%s: volume %s: ConfigMap %s is not rendered", id, v.Name, v.ConfigMap.Name) {
					for _, it := range v.ConfigMap.Items {
						assert.Contains(t, cm.Data, it.Key, "%s: volume %s", id, v.Name)
					}
					// A hook runs before the release's other objects exist.
					if w.hook {
						assert.Contains(t, cm.Annotations["helm.sh/hook"], "pre-install", "%s: ConfigMap %s must be a hook too", id, cm.Name)
					}
				}
			}
		}
		require.Len(t, spec.Containers, 1, id)
		c := spec.Containers[0]
		require.NotEmpty(t, c.Args, id)
		for _, m := range c.VolumeMounts {
			assert.Contains(t, volumes, m.Name, "%s mounts an undefined volume", id)
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				assert.NotEmpty(t, e.ValueFrom.SecretKeyRef.Name, "%s: %s: Secret name", id, e.Name)
				assert.NotEmpty(t, e.ValueFrom.SecretKeyRef.Key, "%s: %s: Secret key", id, e.Name)
			}
		}
		require.NotNil(t, c.SecurityContext, id)
		assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation, id)
		assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem, id)
		assert.Equal(t, "/etc/sundial/config/config.yaml", env(c)["SUNDIAL_CONFIG"].Value, id)
		assert.NotEmpty(t, c.Resources.Requests.Memory().String(), id)
		if w.kind == "Job" {
			continue
		}
		ports := map[string]int32{}
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
		}
		for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
			if !assert.NotNil(t, p, "%s: %s probe", id, name) {
				continue
			}
			require.NotNil(t, p.HTTPGet, "%s: %s probe", id, name)
			assert.Contains(t, ports, p.HTTPGet.Port.String(), "%s: %s probe names a port the container has", id, name)
		}
		assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path, id)
		assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path, id)
		cfg := configOf(t, objs, w)
		assert.Equal(t, fmt.Sprintf(":%d", ports["metrics"]), cfg["metrics-addr"], "%s: --metrics-addr serves the probes' port", id)
	}
}

func selectsAny(sel labels.Selector, sets []labels.Set) bool {
	for _, s := range sets {
		if sel.Matches(s) {
			return true
		}
	}
	return false
}

func TestDefaultValues(t *testing.T) {
	t.Parallel()
	objs := render(t, nil)
	checkObjects(t, objs)
	t.Log(strings.Join(kinds(objs), " "))

	for _, name := range []string{"registry", "dispatcher", "runner", "dagengine"} {
		w := component(t, objs, name)
		assert.Equal(t, "Deployment", w.kind, name)
		c := w.pod.Spec.Containers[0]
		for _, e := range c.Env {
			assert.True(t, e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil, "%s: no Secret without credentials: %s", name, e.Name)
		}
		assert.Len(t, w.pod.Spec.Volumes, 2, "%s: config and tmp, no TLS", name)
		// The consumer group members are static under the pod name, so a
		// crashed container restarted in its pod gets its partitions back.
		if name == "registry" {
			assert.NotContains(t, env(c), "SUNDIAL_GROUP_INSTANCE_ID", "the registry takes no instance id")
			continue
		}
		require.Contains(t, env(c), "SUNDIAL_GROUP_INSTANCE_ID", name)
		assert.Equal(t, "metadata.name", env(c)["SUNDIAL_GROUP_INSTANCE_ID"].ValueFrom.FieldRef.FieldPath, name)
	}
	assert.Equal(t, []string{"dag", "engine"}, component(t, objs, "dagengine").pod.Spec.Containers[0].Args)
	for _, o := range objs {
		assert.NotEqual(t, "history", o.obj.(metav1.Object).GetLabels()["app.kubernetes.io/component"], "history consumer off by default")
		assert.NotContains(t, []string{"ServiceMonitor", "PrometheusRule"}, o.kind, "the operator's resources are off by default")
	}
	runner := configOf(t, objs, component(t, objs, "runner"))
	assert.Equal(t, true, runner["history"], "without the history consumer the runners store the history")
	assert.Equal(t, "redis:6379", runner["redis-addr"])
	assert.Equal(t, []any{"kafka:9092"}, runner["kafka-brokers"])
	assert.NotContains(t, configOf(t, objs, component(t, objs, "dispatcher")), "redis-addr", "a key the dispatcher does not know")

	migrate := component(t, objs, "migrate")
	assert.Equal(t, "Job", migrate.kind)
	assert.True(t, migrate.hook)
	assert.Equal(t, []string{"migrate"}, migrate.pod.Spec.Containers[0].Args)
	mc := configOf(t, objs, migrate)
	assert.Equal(t, 128, mc["shards"])
	assert.NotContains(t, mc, "metrics-addr", "migrate serves no metrics")
}

func TestSecuredValues(t *testing.T) {
	t.Parallel()
	objs := render(t, []string{"values-secured.yaml"})
	checkObjects(t, objs)
	t.Log(strings.Join(kinds(objs), " "))

	runner := component(t, objs, "runner")
	assert.Equal(t, "StatefulSet", runner.kind, "static membership")
	re := env(runner.pod.Spec.Containers[0])
	require.Contains(t, re, "SUNDIAL_GROUP_INSTANCE_ID")
	assert.Equal(t, "metadata.name", re["SUNDIAL_GROUP_INSTANCE_ID"].ValueFrom.FieldRef.FieldPath)
	for _, name := range []string{"SUNDIAL_KAFKA_SASL_PASSWORD", "SUNDIAL_CASSANDRA_PASSWORD", "SUNDIAL_REDIS_PASSWORD"} {
		require.Contains(t, re, name)
		ref := re[name].ValueFrom.SecretKeyRef
		require.NotNil(t, ref, name)
		assert.Equal(t, "sundial-backends", ref.Name, name)
	}
	cfg := configOf(t, objs, runner)
	for k, v := range map[string]any{
		"kafka-tls": true, "kafka-tls-ca-file": "/etc/sundial/tls/kafka/ca.crt", "kafka-sasl-mechanism": "SCRAM-SHA-512", "kafka-sasl-username": "sundial",
		"cassandra-tls": true, "cassandra-username": "sundial", "cassandra-datacenter": "dc1",
		"redis-tls": true, "redis-tls-cert-file": "/etc/sundial/tls/redis/tls.crt", "redis-tls-key-file": "/etc/sundial/tls/redis/tls.key",
		"redis-cluster": true, "redis-username": "sundial", "history": false, "concurrency": 256,
	} {
		assert.Equal(t, v, cfg[k], k)
	}
	for k, v := range cfg {
		assert.NotContains(t, strings.ToLower(k), "password", "passwords come from Secrets, not the config file: %s=%v", k, v)
	}
	// Every file the config names is on a mounted Secret.
	mounts := runner.pod.Spec.Containers[0].VolumeMounts
	for k, v := range cfg {
		if !strings.HasSuffix(k, "-file") {
			continue
		}
		var under bool
		for _, m := range mounts {
			under = under || strings.HasPrefix(v.(string), m.MountPath+"/")
		}
		assert.True(t, under, "%s=%s is on no mount", k, v)
	}

	// The dispatcher does not talk to Redis: neither its password nor its
	// certificates.
	d := component(t, objs, "dispatcher")
	assert.NotContains(t, env(d.pod.Spec.Containers[0]), "SUNDIAL_REDIS_PASSWORD")
	assert.NotContains(t, configOf(t, objs, d), "redis-tls")

	h := component(t, objs, "history")
	assert.Equal(t, []string{"history"}, h.pod.Spec.Containers[0].Args)
	assert.Contains(t, env(component(t, objs, "migrate").pod.Spec.Containers[0]), "SUNDIAL_CASSANDRA_PASSWORD", "the hook reads the Secrets too")
	assert.Equal(t, 3, configOf(t, objs, component(t, objs, "migrate"))["topic-replication-factor"])

	var rule *monitoringv1.PrometheusRule
	var sm bool
	for _, o := range objs {
		switch v := o.obj.(type) {
		case *monitoringv1.PrometheusRule:
			rule = v
		case *monitoringv1.ServiceMonitor:
			sm = true
			assert.Equal(t, "kube-prometheus-stack", v.Labels["release"])
		}
	}
	assert.True(t, sm, "ServiceMonitor rendered")
	require.NotNil(t, rule, "PrometheusRule rendered")
	// Every rule of deploy/prometheus/rules is in it.
	var want, got []string
	for _, f := range ruleFiles(t) {
		for _, g := range f.Groups {
			for _, r := range g.Rules {
				want = append(want, g.Name+"/"+r.Alert+r.Record+" "+r.Expr)
			}
		}
	}
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			got = append(got, g.Name+"/"+r.Alert+r.Record+" "+r.Expr.String())
		}
	}
	assert.ElementsMatch(t, want, got)
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert  string `yaml:"alert"`
			Record string `yaml:"record"`
			Expr   string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func ruleFiles(t *testing.T) []ruleFile {
	t.Helper()
	paths, err := filepath.Glob("../../prometheus/rules/*.yml")
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	var out []ruleFile
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		var f ruleFile
		require.NoError(t, yaml.Unmarshal(b, &f), p)
		out = append(out, f)
	}
	return out
}

func TestDashboards(t *testing.T) {
	t.Parallel()
	objs := render(t, nil)
	sources, err := filepath.Glob("../../grafana/dashboards/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, sources)
	cms := configMaps(objs)
	for _, src := range sources {
		name := filepath.Base(src)
		cm, ok := cms["sundial-dashboard-"+strings.TrimSuffix(name, ".json")]
		if !assert.True(t, ok, "no ConfigMap for %s", name) {
			continue
		}
		assert.Equal(t, "1", cm.Labels["grafana_dashboard"], "the sidecar's label")
		var d map[string]any
		require.NoError(t, json.Unmarshal([]byte(cm.Data[name]), &d), name)
		assert.NotEmpty(t, d["title"], name)
	}
}

// TestChartFilesInSync fails when the chart's copies of the dashboards and
// rules differ from deploy/grafana/dashboards and deploy/prometheus/rules
// (a chart cannot read files outside its directory): `make chart-files`.
func TestChartFilesInSync(t *testing.T) {
	t.Parallel()
	for src, dst := range map[string]string{
		"../../grafana/dashboards/*.json": "../sundial/files/dashboards",
		"../../prometheus/rules/*.yml":    "../sundial/files/rules",
	} {
		paths, err := filepath.Glob(src)
		require.NoError(t, err)
		copies, err := filepath.Glob(filepath.Join(dst, "*"))
		require.NoError(t, err)
		assert.Len(t, copies, len(paths), "%s holds other files than %s: run make chart-files", dst, src)
		for _, p := range paths {
			want, err := os.ReadFile(p)
			require.NoError(t, err)
			got, err := os.ReadFile(filepath.Join(dst, filepath.Base(p)))
			if assert.NoError(t, err, "run make chart-files") {
				assert.True(t, string(want) == string(got), "%s differs from %s: run make chart-files", filepath.Join(dst, filepath.Base(p)), p)
			}
		}
	}
}

func TestValuesRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		set  []string
		want string
	}{
		{[]string{"kafka.brokers=null"}, "kafka.brokers: required"},
		{[]string{"cassandra.hosts=null"}, "cassandra.hosts: required"},
		{[]string{"redis.addrs=null"}, "redis.addrs: required"},
		{[]string{"kafka.sasl.mechanism=GSSAPI"}, `kafka.sasl.mechanism: "GSSAPI" is not`},
		{[]string{"kafka.sasl.mechanism=PLAIN"}, "kafka.sasl.username: required with PLAIN"},
		{[]string{"kafka.sasl.mechanism=OAUTHBEARER"}, "kafka.sasl.tokenSecret.name: required with OAUTHBEARER"},
		{[]string{"kafka.tls.enabled=true"}, "kafka.tls.secretName: required"},
		{[]string{"redis.tls.enabled=true", "redis.tls.secretName=s", "redis.tls.cert=tls.crt"}, "redis.tls.cert and redis.tls.key: give both"},
		{[]string{"cassandra.username=u"}, "cassandra.passwordSecret.name: required with cassandra.username"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			_, err := renderErr(nil, tt.set...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestOAuthBearerTokenIsAMountedFile(t *testing.T) {
	t.Parallel()
	objs := render(t, nil, "kafka.sasl.mechanism=OAUTHBEARER", "kafka.sasl.tokenSecret.name=kafka-oauth")
	checkObjects(t, objs)
	w := component(t, objs, "registry")
	cfg := configOf(t, objs, w)
	assert.Equal(t, "/etc/sundial/secrets/kafka/kafka-token", cfg["kafka-sasl-token-file"])
	assert.NotContains(t, env(w.pod.Spec.Containers[0]), "SUNDIAL_KAFKA_SASL_PASSWORD")
	var found bool
	for _, v := range w.pod.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == "kafka-oauth" {
			found = true
		}
	}
	assert.True(t, found, "the token's Secret is a volume")
}

// TestStrictDecoding shows that the validation catches what a schema does:
// a misspelt or misplaced field, a wrong type, an unknown kind.
func TestStrictDecoding(t *testing.T) {
	t.Parallel()
	dec, err := newStrictDecoder()
	require.NoError(t, err)
	good := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: v}\n"
	_, err = dec.decode([]byte(good))
	require.NoError(t, err)
	for name, doc := range map[string]string{
		"unknown field":   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndatas: {k: v}\n",
		"misplaced field": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec: {replicas: 1, containers: []}\n",
		"wrong type":      "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: http}]}\n",
		"unknown kind":    "apiVersion: v1\nkind: Deploymnet\nmetadata: {name: a}\n",
		"duplicate field": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: v}\ndata: {k: w}\n",
	} {
		_, err := dec.decode([]byte(doc))
		assert.Error(t, err, name)
	}
}

// TestHelmLint runs `helm lint` (the library's) with the default and the
// secured values; anything above an information fails.
func TestHelmLint(t *testing.T) {
	t.Parallel()
	for _, files := range [][]string{nil, {"values-secured.yaml"}} {
		opts := values.Options{}
		for _, f := range files {
			opts.ValueFiles = append(opts.ValueFiles, filepath.Join(chartDir, f))
		}
		vals, err := opts.MergeValues(getter.Providers{})
		require.NoError(t, err)
		lint := action.NewLint()
		lint.Strict = true
		res := lint.Run([]string{chartDir}, vals)
		for _, m := range res.Messages {
			if m.Severity > support.InfoSev {
				t.Errorf("%v: %s", files, m)
			} else {
				t.Logf("%v: %s", files, m)
			}
		}
		for _, err := range res.Errors {
			t.Errorf("%v: %v", files, err)
		}
	}
}

// TestAPIComponent runs `sundial api` when api.enabled: a Deployment
// serving the API port, its config holding only flags of `sundial api`
// (checkObjects), and a load-balanced Service in front of it.
func TestAPIComponent(t *testing.T) {
	t.Parallel()
	assert.NotContains(t, kinds(render(t, nil)), "Service/sundial-api-http", "the API is off by default")

	objs := render(t, nil, "api.enabled=true", "api.config.oidc-issuer=https://id.example")
	checkObjects(t, objs)
	api := component(t, objs, "api")
	c := api.pod.Spec.Containers[0]
	assert.Equal(t, []string{"api"}, c.Args)
	assert.Equal(t, "0.0.0.0:8480", configOf(t, objs, api)["listen"])
	var port int32
	for _, p := range c.Ports {
		if p.Name == "api" {
			port = p.ContainerPort
		}
	}
	assert.Equal(t, int32(8480), port)
	assert.Equal(t, "https://id.example", configOf(t, objs, api)["oidc-issuer"])
	var svc *corev1.Service
	for _, o := range objs {
		if s, ok := o.obj.(*corev1.Service); ok && strings.HasSuffix(s.Name, "-api-http") {
			svc = s
		}
	}
	require.NotNil(t, svc, "no Service in front of the API")
	assert.Equal(t, corev1.ServiceTypeClusterIP, svc.Spec.Type)
	assert.NotEqual(t, corev1.ClusterIPNone, svc.Spec.ClusterIP)
	assert.Equal(t, "api", svc.Spec.Ports[0].TargetPort.StrVal)
	assert.Equal(t, int32(8480), svc.Spec.Ports[0].Port)
}
