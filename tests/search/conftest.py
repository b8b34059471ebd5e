from tests.fabric import lab_fixtures
from tests.live import fabric_fixtures

world = fabric_fixtures.world
lab_data_dir = lab_fixtures.lab_data_dir
lab_fabric = lab_fixtures.lab_fabric
su1_revision = lab_fixtures.su1_revision
