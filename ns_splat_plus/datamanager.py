"""SplatPlusDataManager: nerfstudio's FullImageDatamanager (cached full images)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Type

from nerfstudio.data.datamanagers.full_images_datamanager import FullImageDatamanager, FullImageDatamanagerConfig


@dataclass
class SplatPlusDataManagerConfig(FullImageDatamanagerConfig):
    _target: Type = field(default_factory=lambda: SplatPlusDataManager)


class SplatPlusDataManager(FullImageDatamanager):
    config: SplatPlusDataManagerConfig
