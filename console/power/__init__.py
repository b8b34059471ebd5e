"""Power management of GPU nodes through their BMCs (Redfish via sushy, IPMI via pyghmi)."""
