// k8scheck decodes Kubernetes manifests strictly into the upstream k8s.io/api types:
// an unknown or misspelt field, a value of the wrong type, a bad quantity or
// int-or-string, a duplicate key, a kind this tool does not know, or an invalid
// name or label is an error. It is the schema check tests/ops/test_manifests.py runs
// on deploy/k8s/ (the network reaches the Go module proxy, not GitHub, so upstream's
// types come from k8s.io/api rather than from a JSON-schema download).
//
// Usage: k8scheck FILE... ; one JSON line per document: {"file","doc","kind","error"}.
// Exit 1 when any document failed.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// object is what every known kind decodes into: its metadata is checked too.
type object interface{ GetObjectMeta() metav1.Object }

// The kinds deploy/k8s/ ships (and their near relatives), by apiVersion/kind. Anything
// else is refused: a typo in apiVersion must not pass as "unknown, skipped".
var kinds = map[string]func() object{
	"v1/ConfigMap":                           func() object { return &corev1.ConfigMap{} },
	"v1/Secret":                              func() object { return &corev1.Secret{} },
	"v1/Service":                             func() object { return &corev1.Service{} },
	"v1/ServiceAccount":                      func() object { return &corev1.ServiceAccount{} },
	"apps/v1/Deployment":                     func() object { return &appsv1.Deployment{} },
	"apps/v1/StatefulSet":                    func() object { return &appsv1.StatefulSet{} },
	"policy/v1/PodDisruptionBudget":          func() object { return &policyv1.PodDisruptionBudget{} },
	"autoscaling/v2/HorizontalPodAutoscaler": func() object { return &autoscalingv2.HorizontalPodAutoscaler{} },
}

type result struct {
	File  string `json:"file"`
	Doc   int    `json:"doc"`
	Kind  string `json:"kind"`
	Error string `json:"error"`
}

func check(doc []byte) (string, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return "", err
	}
	kind := tm.APIVersion + "/" + tm.Kind
	make_, ok := kinds[kind]
	if !ok {
		return kind, fmt.Errorf("unknown apiVersion/kind %q", kind)
	}
	obj := make_()
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return kind, err
	}
	meta := obj.GetObjectMeta()
	var problems []string
	for _, p := range validation.IsDNS1123Subdomain(meta.GetName()) {
		problems = append(problems, "metadata.name: "+p)
	}
	for k, v := range meta.GetLabels() {
		for _, p := range validation.IsQualifiedName(k) {
			problems = append(problems, "label "+k+": "+p)
		}
		for _, p := range validation.IsValidLabelValue(v) {
			problems = append(problems, "label value "+v+": "+p)
		}
	}
	if len(problems) > 0 {
		return kind, errors.New(strings.Join(problems, "; "))
	}
	return kind, nil
}

func main() {
	failed := false
	out := json.NewEncoder(os.Stdout)
	for _, path := range os.Args[1:] {
		data, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for n := 0; ; {
			doc, err := reader.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, path, err)
				os.Exit(2)
			}
			// A document of comments only is no object.
			if j, jerr := yaml.YAMLToJSON(doc); jerr == nil && string(bytes.TrimSpace(j)) == "null" {
				continue
			}
			kind, cerr := check(doc)
			r := result{File: path, Doc: n, Kind: kind}
			if cerr != nil {
				r.Error = cerr.Error()
				failed = true
			}
			_ = out.Encode(r)
			n++
		}
	}
	if failed {
		os.Exit(1)
	}
}
