package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// Output formats for -o.
const (
	outputTable = ""
	outputWide  = "wide"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// checkOutput refuses an -o value the command does not support.
func checkOutput(format string, allowed ...string) error {
	for _, a := range allowed {
		if format == a {
			return nil
		}
	}
	var names []string
	for _, a := range allowed {
		if a != outputTable {
			names = append(names, a)
		}
	}
	return usageError{msg: fmt.Sprintf("unsupported output format %q; use one of: %s", format, strings.Join(names, ", "))}
}

// printObject writes obj as JSON or YAML with its apiVersion and kind set,
// as kubectl get -o does.
func printObject(w io.Writer, obj runtime.Object, format string) error {
	setTypeMeta(obj)
	if list, ok := obj.(*elastiv1alpha1.ElastiServiceList); ok {
		for i := range list.Items {
			setTypeMeta(&list.Items[i])
		}
	}
	var (
		b   []byte
		err error
	)
	switch format {
	case outputJSON:
		b, err = json.MarshalIndent(obj, "", "    ")
		b = append(b, '\n')
	case outputYAML:
		b, err = yaml.Marshal(obj)
	default:
		return fmt.Errorf("cannot print objects as %q", format)
	}
	if err != nil {
		return fmt.Errorf("encode as %s: %w", format, err)
	}
	_, err = w.Write(b)
	return err
}

func setTypeMeta(obj runtime.Object) {
	if gvk, err := apiutil.GVKForObject(obj, newScheme()); err == nil {
		obj.GetObjectKind().SetGroupVersionKind(gvk)
	}
}
