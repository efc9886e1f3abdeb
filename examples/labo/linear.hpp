// The lab's model and tensors, just big enough for the lesson: a Linear
// layer with two inputs, one output and no bias, whose loss is its single
// output. Then dloss/dweight is the input row, which is what the lab checks.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "mci/ddp.hpp"
#include "mci/types.hpp"

#ifdef LABO_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace labo {

// A float vector on the host or on a CUDA device.
class DeviceVector {
 public:
  DeviceVector(mci::Device d, const std::vector<float>& init) : device_(d), host_(init) {
#ifdef LABO_WITH_CUDA
    if (d.is_cuda()) {
      cudaSetDevice(d.index);
      cudaMalloc(&dev_, init.size() * sizeof(float));
      cudaMemcpy(dev_, init.data(), init.size() * sizeof(float), cudaMemcpyHostToDevice);
    }
#endif
  }
  DeviceVector(const DeviceVector& o) : DeviceVector(o.device_, o.to_host()) {}
  DeviceVector& operator=(const DeviceVector&) = delete;
  ~DeviceVector() {
#ifdef LABO_WITH_CUDA
    if (dev_) cudaFree(dev_);
#endif
  }

  mci::BufferView view() { return mci::BufferView{dev_ ? dev_ : host_.data(), host_.size(), mci::DType::f32, device_}; }
  std::vector<float> to_host() const {
#ifdef LABO_WITH_CUDA
    if (dev_) {
      std::vector<float> out(host_.size());
      cudaMemcpy(out.data(), dev_, out.size() * sizeof(float), cudaMemcpyDeviceToHost);
      return out;
    }
#endif
    return host_;
  }
  void from_host(const std::vector<float>& v) {
    host_ = v;
#ifdef LABO_WITH_CUDA
    if (dev_) cudaMemcpy(dev_, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice);
#endif
  }

 private:
  mci::Device device_;
  std::vector<float> host_;
  float* dev_ = nullptr;
};

class Linear {
 public:
  Linear(mci::Device d, const std::vector<float>& weight)
      : weight_(d, weight), grad_(d, std::vector<float>(weight.size(), 0.0f)) {}

  std::vector<mci::Parameter> parameters() { return {{"weight", weight_.view(), grad_.view()}}; }

  float forward(const std::vector<float>& x) const {
    const std::vector<float> w = weight_.to_host();
    float y = 0;
    for (std::size_t i = 0; i < w.size(); ++i) y += w[i] * x[i];
    return y;
  }

  // loss = y, so dloss/dweight = x. `hook(i)` is the autograd hook: it runs
  // once parameter i's gradient is written.
  void backward(const std::vector<float>& x, const std::function<void(std::size_t)>& hook) {
    grad_.from_host(x);
    hook(0);
  }

  std::vector<float> grad_to_host() const { return grad_.to_host(); }

 private:
  DeviceVector weight_;
  DeviceVector grad_;
};

}  // namespace labo
