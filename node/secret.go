package node

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/toolnode/toolnode/clusterport"
)

// ClusterSecretFile is the name, in the data directory, of the cluster
// secret a lone node makes when it is given neither a gossip key nor mTLS
// (clusterport.SecretFile). Landlock does not cover UDP, so unkeyed gossip
// would let a tool inject members.
const ClusterSecretFile = clusterport.SecretFile

// clusterCredential gives a node without a gossip key or mTLS one: the
// cluster secret of its data directory, made at its first start. A node
// that would form a cluster of several (-join, or the peers it last saw)
// with neither refuses to start, unless -insecure; under -insecure a lone
// node makes no secret either.
func (n *Node) clusterCredential() error {
	c := &n.cfg
	if len(c.EncryptKey) > 0 || c.TLSCert != "" || c.TLSKey != "" || c.TLSCA != "" ||
		c.RaftTransport != nil || c.GossipTransport != nil {
		return nil
	}
	path := filepath.Join(c.DataDir, ClusterSecretFile)
	key, err := clusterport.ReadSecret(path)
	switch {
	case err == nil:
		c.EncryptKey = key
		n.logger.Printf("gossip and cluster port: keyed by this node's cluster secret %s (a node that joins needs -encrypt with it)", path)
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	if c.Insecure && !n.joins() {
		n.warnf("WARNING: -insecure: no gossip key and no mTLS, and no cluster secret made: anything on this host, a tool included, can speak to the gossip and cluster ports")
		return nil
	}
	if n.joins() {
		if c.Insecure {
			n.warnf("WARNING: -insecure: this node joins a cluster with neither a gossip key nor mTLS: anything that reaches a member's gossip or cluster port, a tool on any member included, can join it and write to it")
			return nil
		}
		return errors.New("refusing to start: a cluster of several nodes needs a credential, and neither -encrypt KEY (toolnode keygen makes one; give every node the same) " +
			"nor -tls-cert/-tls-key/-tls-ca is given: anything that reaches a member's gossip or cluster port could join the cluster; give one, or start with -insecure")
	}
	if key, err = clusterport.MakeSecret(path); err != nil {
		return err
	}
	c.EncryptKey = key
	n.logger.Printf("gossip and cluster port: no -encrypt and no mTLS: made this node's cluster secret %s (mode 0600); a node that joins needs -encrypt with it", path)
	return nil
}
