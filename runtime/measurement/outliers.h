// Activation outliers, what makes per-tensor 8-bit activations lossy (Bondarenko et al. 2023; the outlier-safe
// pretraining and softpick papers report both): over every value of a layer's activations on the measured
// sequences, the largest |value| and the excess kurtosis E[(x - mu)^4] / sigma^4 - 3 (0 for a Gaussian; population
// moments, as scipy.stats.kurtosis with its defaults). Accumulated chunk by chunk, so that a measurement in chunks
// gives the kurtosis of all its values, not a mean of the chunks'.
#pragma once
#include <torch/torch.h>
#include <vector>

namespace sink::rt {

class Moments {
 public:
  void add(const torch::Tensor& values);  // any shape; read in double
  Moments& operator+=(const Moments& o);
  double max_abs() const { return max_abs_; }
  double excess_kurtosis() const;  // NaN with no spread
  double count() const { return n_; }

 private:
  // Sums of powers of (x - shift): the shift (the first chunk's mean) keeps them from cancelling.
  double shift_ = 0, n_ = 0, s1_ = 0, s2_ = 0, s3_ = 0, s4_ = 0, max_abs_ = 0;
  bool shifted_ = false;
};

// Per layer: each one's excess kurtosis, each one's largest |value|.
std::vector<double> excess_kurtosis(const std::vector<Moments>& layers);
std::vector<double> max_abs(const std::vector<Moments>& layers);

}  // namespace sink::rt
