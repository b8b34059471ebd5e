"""A UFM-compatible P_Key API (``/ufmRest/``): the subset of NVIDIA UFM Enterprise's REST API that
P_Key clients (ib-kubernetes's UFM plugin, networking-mlnx-baremetal's ufmclient, site scripts)
use, served by the console over its own audited partition pipeline. See docs/api.md."""
