//! k1s-cri: the CRI v1 (runtime.v1) client: generated gRPC code, RuntimeService/ImageService traits, a fake.
