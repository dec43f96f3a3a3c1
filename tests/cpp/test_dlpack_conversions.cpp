// The C++ conversions behind the table, on CPU tensors: the export layout,
// what cannot be exported, import validation, and who runs the deleter.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "devbridge/dlpack_exchange.h"
#include "devbridge/runtime.h"

namespace devbridge {
namespace {

TEST(Export, OwningExportDescribesTheTensorAndKeepsItAlive) {
  at::Tensor base = at::arange(24, at::kFloat).reshape({2, 3, 4});
  at::Tensor view = base.transpose(0, 2).slice(0, 1);  // non-contiguous, offset
  DLManagedTensorVersioned* managed = ExportOwning(view);
  const DLTensor& dl = managed->dl_tensor;
  EXPECT_EQ(managed->version.major, 1u);
  EXPECT_EQ(managed->flags, 0u);
  EXPECT_EQ(dl.data, view.data_ptr());
  EXPECT_EQ(dl.byte_offset, 0u);
  EXPECT_EQ(dl.ndim, 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(dl.shape[i], view.size(i));
    EXPECT_EQ(dl.strides[i], view.stride(i));
  }
  const auto uses_before = base.storage().use_count();
  view.reset();
  base.reset();
  // The export's reference keeps the storage (and the data) valid: element
  // [1, 0, 0] of the transposed view is base[0, 0, 1] == 1.
  EXPECT_EQ(static_cast<float*>(dl.data)[0], 1.0f);
  EXPECT_GE(uses_before, 2);
  managed->deleter(managed);
}

TEST(Export, DeleterReleasesTheReferenceExactlyOnce) {
  at::Tensor tensor = at::ones({4});
  const auto uses = tensor.use_count();
  DLManagedTensorVersioned* managed = ExportOwning(tensor);
  EXPECT_EQ(tensor.use_count(), uses + 1);
  managed->deleter(managed);
  EXPECT_EQ(tensor.use_count(), uses);
}

TEST(Export, NonOwningPointsIntoTheTensorsOwnMetadata) {
  at::Tensor tensor = at::zeros({5, 7}).t();
  DLTensor out{};
  ExportNonOwning(tensor, &out);
  EXPECT_EQ(out.shape, tensor.sizes().data());
  EXPECT_EQ(out.strides, tensor.strides().data());
  EXPECT_EQ(out.data, tensor.data_ptr());
  EXPECT_EQ(out.device.device_type, kDLCPU);
}

TEST(Export, UnrepresentableTensorsAreBufferErrors) {
  const at::Tensor complex = at::ones({3}, at::kComplexFloat);
  const at::Tensor cases[] = {complex.conj(), at::ones({3}).neg().view({3})._neg_view(),
                              at::ones({2, 2}).to_sparse()};
  const char* expected[] = {"resolve_conj", "resolve_neg", "only strided tensors"};
  for (size_t i = 0; i < 3; ++i) {
    try {
      ExportOwning(cases[i]);
      FAIL() << "expected an error for case " << i;
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::kBuffer);
      EXPECT_NE(std::string(error.what()).find(expected[i]), std::string::npos) << error.what();
    }
    DLTensor out{};
    EXPECT_THROW(ExportNonOwning(cases[i], &out), Error);
  }
}

TEST(Export, PluginDeviceLabel) {
  const c10::Device device(c10::DeviceType::PrivateUse1, 1);
  DLDevice dl = ToDLDevice(device);
  EXPECT_EQ(dl.device_type, kDLExtDev);
  EXPECT_EQ(dl.device_id, 1);
  Options options;
  options.export_ascend_device_type = true;
  SetOptions(options);
  dl = ToDLDevice(device);
  SetOptions(Options{});
  EXPECT_EQ(static_cast<int>(dl.device_type), 21);
  EXPECT_EQ(ToDLDevice(c10::Device(c10::DeviceType::CPU)).device_type, kDLCPU);
}

// A managed tensor over a std::vector, with a deleter that counts its calls.
struct CountedManaged {
  std::vector<float> data = std::vector<float>(12, 2.0f);
  std::vector<int64_t> shape{3, 4};
  std::vector<int64_t> strides{4, 1};
  int deleter_calls = 0;
  DLManagedTensorVersioned managed{};

  CountedManaged() {
    managed.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensorVersioned* self) {
      ++static_cast<CountedManaged*>(self->manager_ctx)->deleter_calls;
    };
    managed.dl_tensor.data = data.data();
    managed.dl_tensor.device = DLDevice{kDLCPU, 0};
    managed.dl_tensor.ndim = 2;
    managed.dl_tensor.dtype = DLDataType{kDLFloat, 32, 1};
    managed.dl_tensor.shape = shape.data();
    managed.dl_tensor.strides = strides.data();
  }
};

TEST(Import, AdoptedTensorRunsTheDeleterOnceWhenItDies) {
  CountedManaged source;
  source.managed.dl_tensor.byte_offset = 4 * sizeof(float);
  source.shape[0] = 2;
  at::Tensor tensor = ImportBorrowing(source.managed);
  AdoptManagedTensor(tensor, &source.managed);
  EXPECT_EQ(tensor.data_ptr(), static_cast<void*>(source.data.data() + 4));
  EXPECT_EQ(tensor.sizes(), at::IntArrayRef({2, 4}));
  EXPECT_TRUE(at::equal(tensor, at::full({2, 4}, 2.0f)));
  at::Tensor view = tensor.slice(1, 1);
  tensor.reset();
  EXPECT_EQ(source.deleter_calls, 0) << "a view still uses the memory";
  view.reset();
  EXPECT_EQ(source.deleter_calls, 1);
}

TEST(Import, BorrowedTensorNeverCallsTheDeleter) {
  CountedManaged source;
  { at::Tensor tensor = ImportBorrowing(source.managed); }
  EXPECT_EQ(source.deleter_calls, 0);
}

TEST(Import, RoundTripThroughExport) {
  at::Tensor original = at::arange(10, at::kDouble).slice(0, 2, 9, 3);
  DLManagedTensorVersioned* managed = ExportOwning(original);
  at::Tensor imported = ImportBorrowing(*managed);
  AdoptManagedTensor(imported, managed);
  EXPECT_EQ(imported.data_ptr(), original.data_ptr());
  EXPECT_TRUE(at::equal(imported, original));
  EXPECT_EQ(imported.strides(), original.strides());
}

struct BadImportCase {
  const char* name;
  void (*spoil)(CountedManaged&);
  ErrorKind kind;
  const char* message_part;
};

TEST(Import, InvalidTensorsAreRejectedWithoutTouchingTheDeleter) {
  const BadImportCase cases[] = {
      {"major version", [](CountedManaged& m) { m.managed.version.major = 2; }, ErrorKind::kBuffer,
       "version 2.3"},
      {"NULL shape", [](CountedManaged& m) { m.managed.dl_tensor.shape = nullptr; },
       ErrorKind::kValue, "NULL shape"},
      {"NULL strides", [](CountedManaged& m) { m.managed.dl_tensor.strides = nullptr; },
       ErrorKind::kValue, "NULL strides"},
      {"negative ndim", [](CountedManaged& m) { m.managed.dl_tensor.ndim = -2; }, ErrorKind::kValue,
       "negative ndim"},
      {"negative size", [](CountedManaged& m) { m.shape[1] = -4; }, ErrorKind::kValue,
       "negative size"},
      {"negative stride", [](CountedManaged& m) { m.strides[0] = -4; }, ErrorKind::kBuffer,
       "negative stride"},
      {"byte offset", [](CountedManaged& m) { m.managed.dl_tensor.byte_offset = 6; },
       ErrorKind::kValue, "byte_offset 6 is not a multiple of the element size 4"},
      {"unknown device",
       [](CountedManaged& m) {
         m.managed.dl_tensor.device.device_type = static_cast<DLDeviceType>(77);
       },
       ErrorKind::kBuffer, "unknown (77)"},
      {"ascend not accepted",
       [](CountedManaged& m) {
         m.managed.dl_tensor.device.device_type = static_cast<DLDeviceType>(21);
       },
       ErrorKind::kBuffer, "accept_ascend_device_type=True"},
      {"plugin not loaded",
       [](CountedManaged& m) { m.managed.dl_tensor.device.device_type = kDLExtDev; },
       ErrorKind::kRuntime, "no PrivateUse1 backend is loaded"},
      {"padded sub-byte",
       [](CountedManaged& m) { m.managed.flags = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED; },
       ErrorKind::kBuffer, "IS_SUBBYTE_TYPE_PADDED"},
      {"NULL data", [](CountedManaged& m) { m.managed.dl_tensor.data = nullptr; },
       ErrorKind::kValue, "NULL data pointer"},
      // at::for_blob would overflow inside a noexcept function and terminate.
      {"overflowing extent",
       [](CountedManaged& m) {
         m.shape = {int64_t{1} << 62, int64_t{1} << 62};
         m.managed.dl_tensor.shape = m.shape.data();
       },
       ErrorKind::kValue, "span more than 2^63 bytes"},
      {"overflowing offset",
       [](CountedManaged& m) {
         m.managed.dl_tensor.byte_offset = std::numeric_limits<uint64_t>::max() - 3;
       },
       ErrorKind::kValue, "span more than 2^63 bytes"},
  };
  for (const auto& c : cases) {
    CountedManaged source;
    c.spoil(source);
    try {
      ImportBorrowing(source.managed);
      ADD_FAILURE() << c.name << ": expected an error";
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), c.kind) << c.name << ": " << error.what();
      EXPECT_NE(std::string(error.what()).find(c.message_part), std::string::npos)
          << c.name << ": " << error.what();
    }
    EXPECT_EQ(source.deleter_calls, 0) << c.name;
  }
}

TEST(Import, DeviceWithoutABackendInThisProcessIsRefused) {
  if (DeviceRuntime::For(c10::DeviceType::CUDA).Available()) GTEST_SKIP() << "CUDA present";
  CountedManaged source;
  source.managed.dl_tensor.device = DLDevice{kDLCUDA, 0};
  try {
    ImportBorrowing(source.managed);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("no support for cuda devices"), std::string::npos)
        << error.what();
  }
}

TEST(Import, UnsupportedDtypeIsABufferError) {
  CountedManaged source;
  source.managed.dl_tensor.dtype = DLDataType{kDLFloat, 8, 1};
  try {
    ImportBorrowing(source.managed);
    FAIL() << "expected an error";
  } catch (...) {
    std::string message;
    EXPECT_EQ(DescribeCurrentException(&message), ErrorKind::kBuffer) << message;
  }
}

TEST(Import, AscendTypeAcceptedInTransitionMode) {
  CountedManaged source;
  source.managed.dl_tensor.device.device_type = static_cast<DLDeviceType>(21);
  Options options;
  options.accept_ascend_device_type = true;
  SetOptions(options);
  // 21 now means PrivateUse1; this process has no plugin, which is the error.
  try {
    ImportBorrowing(source.managed);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("no PrivateUse1 backend is loaded"),
              std::string::npos)
        << error.what();
  }
  SetOptions(Options{});
}

}  // namespace
}  // namespace devbridge
