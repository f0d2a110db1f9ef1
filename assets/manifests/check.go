package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/kiln-project/kiln/assets/internal/yamlkeys"
	"github.com/kiln-project/kiln/graph"
)

// strictDecoder decodes the kinds client-go knows, refusing unknown and
// duplicate fields.
var strictDecoder = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// FileError is a manifest or static pod in --dir that kiln cannot use. It
// names the file (and the YAML document, counted from 1, of a file that
// holds several) and is an input error.
type FileError struct {
	// Path is the file's path in --dir.
	Path string
	// Doc is the YAML document within the file, from 1; 0 when the file
	// holds one document.
	Doc int
	// Err is what is wrong.
	Err error
}

// Error implements error.
func (e *FileError) Error() string {
	if e.Doc > 0 {
		return fmt.Sprintf("%s: document %d: %v", e.Path, e.Doc, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Path, e.Err)
}

// Unwrap returns the cause.
func (e *FileError) Unwrap() error { return e.Err }

// fileError is a FileError classified as input.
func fileError(path string, doc int, err error) error {
	return &graph.InputError{Err: &FileError{Path: path, Doc: doc, Err: err}}
}

// CheckObjects decodes every YAML document of f as a Kubernetes object, so
// an edit that would break `kubectl apply` on the bootstrap machine is
// caught in --dir. A key set twice is an error in any document, naming
// both lines (YAML would keep the last one silently). Kinds client-go knows
// are decoded strictly into their Go type (unknown fields are errors);
// other kinds (custom resources) need apiVersion, kind and metadata.name.
func CheckObjects(f *graph.File) error {
	if err := checkDuplicateKeys(f); err != nil {
		return err
	}
	docs, err := splitYAML(f.Data)
	if err != nil {
		return fileError(f.Path, 0, err)
	}
	if len(docs) == 0 {
		return fileError(f.Path, 0, errors.New("holds no object; delete the file to apply nothing"))
	}
	for i, d := range docs {
		n := 0
		if len(docs) > 1 {
			n = i + 1
		}
		if err := checkObject(d); err != nil {
			return fileError(f.Path, n, err)
		}
	}
	return nil
}

func checkObject(doc []byte) error {
	var meta struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		return err
	}
	switch {
	case meta.APIVersion == "":
		return errors.New("no apiVersion")
	case meta.Kind == "":
		return errors.New("no kind")
	}
	_, _, err := strictDecoder.Decode(doc, nil, nil)
	if runtime.IsNotRegisteredError(err) {
		if meta.Metadata.Name == "" {
			return fmt.Errorf("%s %s: no metadata.name", meta.APIVersion, meta.Kind)
		}
		return nil
	}
	return err
}

// CheckPod decodes f strictly as one corev1.Pod, as the kubelet reads a
// static pod; a key set twice is an error naming both lines.
func CheckPod(f *graph.File) error {
	if err := checkDuplicateKeys(f); err != nil {
		return err
	}
	docs, err := splitYAML(f.Data)
	if err != nil {
		return fileError(f.Path, 0, err)
	}
	if len(docs) != 1 {
		return fileError(f.Path, 0, fmt.Errorf("holds %d YAML documents; a static pod file holds exactly one Pod", len(docs)))
	}
	obj, _, err := strictDecoder.Decode(docs[0], nil, nil)
	if err != nil {
		return fileError(f.Path, 0, err)
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return fileError(f.Path, 0, fmt.Errorf("is a %T, not a Pod", obj))
	}
	if pod.Name == "" || len(pod.Spec.Containers) == 0 {
		return fileError(f.Path, 0, errors.New("a static pod needs metadata.name and at least one container"))
	}
	return nil
}

// checkDuplicateKeys returns an input error for each key set twice in f,
// with its field path and both lines in the file; nil when there is none.
func checkDuplicateKeys(f *graph.File) error {
	var errs []error
	for _, d := range yamlkeys.Find(f.Data) {
		errs = append(errs, &FileError{Path: f.Path, Err: d})
	}
	if len(errs) == 0 {
		return nil
	}
	return &graph.InputError{Err: errors.Join(errs...)}
}

// splitYAML returns the non-empty documents of a YAML stream.
func splitYAML(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		d, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		j, err := yaml.YAMLToJSON(d)
		if err != nil {
			return nil, err
		}
		if s := string(bytes.TrimSpace(j)); s != "null" && s != "" {
			docs = append(docs, d)
		}
	}
}
