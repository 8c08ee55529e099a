package cluster

import (
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes a kubeconfig for the client certificate pki/<cert>
// that reaches the kube-apiserver at server.
func (c Config) writeKubeconfig(path, server, cert string) error {
	pki := c.pkiDir()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["elasti"] = &clientcmdapi.Cluster{
		Server:               server,
		CertificateAuthority: filepath.Join(pki, "ca.crt"),
	}
	cfg.AuthInfos[cert] = &clientcmdapi.AuthInfo{
		ClientCertificate: filepath.Join(pki, cert+".crt"),
		ClientKey:         filepath.Join(pki, cert+".key"),
	}
	cfg.Contexts["elasti"] = &clientcmdapi.Context{Cluster: "elasti", AuthInfo: cert, Namespace: "default"}
	cfg.CurrentContext = "elasti"
	return clientcmd.WriteToFile(*cfg, path)
}

// componentKubeconfig is the kubeconfig component name uses inside the node.
func (c Config) componentKubeconfig(name string) string {
	return filepath.Join(c.etcDir(), name+".kubeconfig")
}

// writeKubeconfigs writes the admin kubeconfig (reaching the kube-apiserver
// from the host through the veth pair) and one per component.
func (c Config) writeKubeconfigs() error {
	local := "https://127.0.0.1:6443"
	for _, name := range []string{"controller-manager", "scheduler"} {
		if err := c.writeKubeconfig(c.componentKubeconfig(name), local, name); err != nil {
			return err
		}
	}
	// The kubelet and kube-proxy use the node address, like on a real node.
	for _, name := range []string{"kubelet", "kube-proxy"} {
		if err := c.writeKubeconfig(c.componentKubeconfig(name), c.APIServerURL(), name); err != nil {
			return err
		}
	}
	return c.writeKubeconfig(c.Kubeconfig(), c.APIServerURL(), "admin")
}
